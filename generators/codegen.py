"""Render a program to standalone Python source: a pure function of the IR.

The source defines ``Program`` (an ``nn.Module``) and ``make_inputs(device)``; it
imports only torch, so it can be pasted into a bug report as it is. Loops stay
loops and helpers stay helpers, so Dynamo traces real bytecode with real line
numbers, which is what the region tracker keys on. Whatever differs between
the repeats of a loop becomes a loop variable; whatever is the same is written
once, as a literal.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

from .autograd import CONTEXT, DEFAULT_DRIVE, DRIVE, FEATURES as AUTOGRAD, INPLACE, helpers as autograd_helpers
from .returns import RETURNS, SINGLE, item, read_lines, reads_second, return_line
from .check import PER_INSTANCE, check, default_value
from .doors import DOORS, PRELUDE as DOOR_PRELUDE, source_door
from .forms import FORMS, PRELUDE, Site
from .values import SUBCLASSES as SUB_BASES
from .inputs import GIVEN, MODULE_DEFS, MODULE_INIT, OMIT, PACKS as EXTRA_PACKS, PARAM as EXTRAS_PARAM
from .inputs import PARAMETER_INIT, TAKES
from .interludes import INTERLUDES
from .ir import (CHILD, Arg, MalformedProgram, Block, Call, Const, Context, DType, Fn, Free, FreeVar, Program, PyList, PySlice,
                 Ref, Section, Stmt, Sub, TensorSpec, Value, typed_key)
from .opinfo import OPINFO, parts as opinfo_parts
from .ops import CALL_VIEWS, OPS, WEIGHT_INITS, W, render_call
from .spellings import contiguous_out, instance_name, spelling, template

HEADER = """\
import torch
import torch.nn as nn
import torch.nn.functional as F"""

IND = "    "


def literal(v: Value) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, tuple):
        inner = ", ".join(literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, PyList):
        return f"[{', '.join(literal(x) for x in v.items)}]"
    if isinstance(v, PySlice):
        return f"slice({v.start!r}, {v.stop!r}, {v.step!r})"
    if isinstance(v, DType):
        return f"torch.{v.name}"
    if isinstance(v, Fn):
        return v.name
    if isinstance(v, Sub):
        return f"{v.cls}({literal(v.value)})"
    return repr(v)


def _shape(shape) -> str:
    return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"


def _weight_init(block: Block, name: str) -> str:
    for stmt in block.body:
        for slot, operand in zip(OPS[stmt.op].slots, stmt.operands):
            if isinstance(slot, W) and operand == Ref(name):
                return slot.init
    return "fan_in"


def _state_lines(block: Block, owner: str) -> list[str]:
    """Parameter and buffer definitions, written inside ``__init__``."""
    lines = []
    for name, spec in block.weights:
        init = WEIGHT_INITS[_weight_init(block, name)].format(
            shape=_shape(spec.shape), fan_in=spec.shape[-1] if spec.shape else 1
        )
        lines.append(f"{owner}.{name} = nn.Parameter({init})")
    for name, spec in block.buffers:
        init = WEIGHT_INITS[_weight_init(block, name)].format(shape=_shape(spec.shape), fan_in=1)
        lines.append(f"{owner}.register_buffer({name!r}, {init})")
    return lines


# --- sub-blocks: names, the instances a module block holds, call sites ---------

CHILDREN = "subs"  # a module block's container of child instances (other than plain attributes)
DECORATOR = "@torch.compiler.nested_compile_region"
# A reuse_hash_fn (Block.reuse "hash"): a constant key of everything a call hands the body that decides its
# graph (each tensor's shape, strides, dtype and requires_grad, each Python value, each other object's type)
# and of the grad mode and autocast state it runs under: calls with one key compute one function, as
# nested_compile_region's contract asks of a key (two calls with one key reuse one subgraph).
REUSE_KEY = "_reuse_key"
REUSE_KEY_DEF = f'''def {REUSE_KEY}(*args, **kwargs):
    parts = [torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"), str(torch.get_default_dtype())]
    for a in torch.utils._pytree.tree_leaves((args, kwargs)):
        if isinstance(a, torch.Tensor):
            parts.append((tuple(a.shape), tuple(a.stride()), str(a.dtype), a.requires_grad))
        elif isinstance(a, (int, float, bool, str, type(None))):
            parts.append(a)
        else:
            parts.append(type(a).__name__)
    return hash(tuple(parts))'''


def decorator_lines(b: Block) -> list[str]:
    """The lines above a block's def: nested_compile_region, with its reuse (Block.reuse)."""
    if not b.compile_region:
        return []
    return [f"{DECORATOR}(reuse_hash_fn={REUSE_KEY})" if b.reuse == "hash" else DECORATOR]


def sub_callable(name: str, kind: str) -> str:
    """The top-level name a sub-block is defined under."""
    return f"block_{name}" if kind == "function" else f"Block{name.title().replace('_', '')}"


def _instance_name(name: str, slot: int) -> str:
    return f"{name}_{slot}"


def _child_lines(program: Program, b: Block) -> list[str]:
    """``__init__`` lines creating a module block's child instances, held as
    ``b.holder`` says."""
    ctors = [(_instance_name(n, k), f"{sub_callable(n, 'module')}()") for n, k in b.instances()
             if program.sub(n).kind == "module"]
    if not ctors:
        return []
    if b.holder == "attr":
        return [f"self.{attr} = {ctor}" for attr, ctor in ctors]
    if b.holder == "module_dict":
        items = ", ".join(f"{attr!r}: {ctor}" for attr, ctor in ctors)
        return [f"self.{CHILDREN} = nn.ModuleDict({{{items}}})"]
    container = "nn.ModuleList([{}])" if b.holder == "module_list" else "nn.Sequential({})"
    return [f"self.{CHILDREN} = {container.format(', '.join(ctor for _, ctor in ctors))}"]


def _child_call(program: Program, b: Block, stmt: Stmt, arg: str) -> str:
    """The statement calling a sub-block from ``b``'s body."""
    name, slot = stmt.operands[1].value, stmt.operands[2].value
    sub = program.sub(name)
    given = f", {GIVEN}={TAKES[sub.takes].expr(TAKES[sub.takes].sub, arg)}" if sub.takes else ""
    if sub.kind == "function":
        return f"{stmt.out} = {_first(sub, sub_callable(name, 'function') + f'({arg}{given})')}"
    attr = _instance_name(name, slot)
    if b.holder == "attr":
        callee = f"self.{attr}"
    elif b.holder == "module_dict":
        callee = f"self.{CHILDREN}[{attr!r}]"
    else:
        modules = [i for i in b.instances() if program.sub(i[0]).kind == "module"]
        callee = f"self.{CHILDREN}[{modules.index((name, slot))}]"
    return f"{stmt.out} = {_first(sub, f'{callee}({arg}{given})')}"


def _first(b: Block, call: str) -> str:
    """What a caller takes of a call of ``b``: its result (a sub-block's other item is read by no one)."""
    return call if b.returns == SINGLE else item(b.returns, call, 0)


def _body_lines(program: Program, b: Block, operand, hooks: dict | None = None) -> list[str]:
    """``hooks``: lines after the statement that makes a value (by name), and before the return ("")."""
    hooks = hooks or {}
    lines = []
    for s in b.body:
        if s.op == CHILD:
            lines.append(_child_call(program, b, s, operand(s.operands[0])))
        elif s.op == OPINFO:
            refs, fmt, _, _ = opinfo_parts(s)
            lines += render_call(OPS[s.op], [operand(o) for o in refs], s.out, fmt)
        else:
            fmt = template(OPS[s.op].fmt, s.op, s.spelling, instance_name(b.name, s.out))
            fmt = contiguous_out(fmt) if program.options.fullgraph and s.spelling == "out" else fmt
            lines += render_call(OPS[s.op], [operand(o) for o in s.operands], s.out, fmt)
        lines += hooks.get(s.out, [])
    if b.takes:
        lines.append(TAKES[b.takes].use.format(r=b.result))
    return lines + hooks.get("", []) + [return_line(b.returns, b.result, b.inputs[0], b.body[0].out if b.body else b.result)]


def _render_sub(program: Program, b: Block) -> list[str]:
    decorator = decorator_lines(b)
    state = {n for n, _ in b.weights}

    def operand(o) -> str:
        if isinstance(o, Const):
            return literal(o.value)
        return f"self.{o.name}" if o.name in state else o.name

    body = _body_lines(program, b, operand)
    x = b.inputs[0] + (f", {GIVEN}=None" if b.takes else "")
    if b.kind == "function":
        return [*decorator, f"def {sub_callable(b.name, 'function')}({x}):", *(IND + line for line in body)]
    init = [*_state_lines(b, "self"), *_child_lines(program, b)]
    return [
        f"class {sub_callable(b.name, 'module')}(nn.Module):",
        f"{IND}def __init__(self):",
        f"{IND * 2}super().__init__()",
        *(IND * 2 + line for line in init),
        "",
        *(IND + d for d in decorator),
        f"{IND}def forward(self, {x}):",
        *(IND * 2 + line for line in body),
    ]


# --- free values: where each lives and how the block reads it -----------------

SETTINGS = "Settings"  # the class holding a function block's class attributes
FACTORY = "_make_block"  # the function whose closure holds closure-homed values
# The user objects holding free values of the object homes: (global, class).
OBJECTS = {"dataclass": ("CONFIG", "Config"), "namespace": ("STATE", None)}
OPTIONS = "OPTS"  # the module-global dict holding free values of the "dict" home, read by key
PACKED = "cfg"  # the parameter a block receives its packed Python arguments as
PACK_CLASS = "Args"  # the class of those objects
INSTANCES = "BLOCKS"  # function instances made by the factory, one per repeat


def global_name(name: str) -> str:
    return name.upper()


def free_read(program: Program, name: str) -> str:
    """The expression the block reads a free value through."""
    home = next(f.home for f in program.frees if f.name == name)
    if home == "global":
        return global_name(name)
    if home == "class_attr":
        return f"self.{name}" if program.block.kind == "module" else f"{SETTINGS}.{name}"
    if home in OBJECTS:
        return f"{OBJECTS[home][0]}.{name}"
    if home == "dict":
        default = next(f.default for f in program.frees if f.name == name)
        return f"{OPTIONS}.get({name!r}, {literal(default[0])})" if default else f"{OPTIONS}[{name!r}]"
    return name  # a closure variable or a parameter


def set_target(program: Program, name: str, callee: str) -> str:
    """What the forward assigns to rebind free value ``name`` before a call of ``callee``."""
    home = next(f.home for f in program.frees if f.name == name)
    if home == "class_attr" and program.block.kind == "module":
        return f"{callee}.{name}"  # an instance attribute shadowing the class's
    if home == "dict":
        return f"{OPTIONS}[{name!r}]"  # the item, however the block reads it
    return free_read(program, name)


# Module-level functions a program with free values its forward rebinds has (harness.execute): the values as
# the forward leaves them, and the values as the program starts, put back before every run. A compiled call must
# leave them as eager does: a store Dynamo drops or misplaces is a wrong result like a wrong tensor.
PYTHON_STATE = "python_state"
RESET_STATE = "reset_python_state"


def written_state(program: Program) -> list[tuple[FreeVar, str, str]]:
    """(free value, what the forward assigns, how to read it back) for each free value the forward rebinds where
    the module holds it (a global, a CONFIG or STATE field, an OPTS item, a function block's Settings attribute;
    a module block's instance attribute is the model's own, made anew with it)."""
    rebound = {n for _, c in program.repeats() for n, _ in c.sets}
    out = []
    for f in program.frees:
        if f.name not in rebound or f.home not in ("global", "dict", "class_attr", *OBJECTS) \
                or (f.home == "class_attr" and program.block.kind == "module"):
            continue
        if f.home == "dict":  # read by key, whether the block reads it with a default or not
            out.append((f, f"{OPTIONS}[{f.name!r}]", f"{OPTIONS}.get({f.name!r})"))
        else:
            out.append((f, free_read(program, f.name), free_read(program, f.name)))
    return out


def _render_python_state(program: Program) -> list[str]:
    written = written_state(program)
    if not written:
        return []
    names = [target for f, target, _ in written if f.home == "global"]
    reads = ", ".join(f"{target!r}: {read}" for _, target, read in written)
    return [f"def {PYTHON_STATE}():", f"{IND}return {{{reads}}}", "", "",
            f"def {RESET_STATE}():", *([f"{IND}global {', '.join(names)}"] if names else []),
            *(f"{IND}{target} = {literal(f.value)}" for f, target, _ in written)]


def frees_at(program: Program, home: str) -> list:
    return [f for f in program.frees if f.home == home]


def _render_globals(program: Program) -> list[str]:
    lines = [f"{global_name(f.name)} = {literal(f.value)}" for f in frees_at(program, "global")]
    if program.block.kind == "function" and frees_at(program, "class_attr"):
        if lines:
            lines.append("")
        lines += [f"class {SETTINGS}:", *(f"{IND}{f.name} = {literal(f.value)}" for f in frees_at(program, "class_attr"))]
    held = frees_at(program, "dataclass")
    if held:
        obj, cls = OBJECTS["dataclass"]
        lines += ["", "@dataclass", f"class {cls}:"]
        lines += [f"{IND}{f.name}: object" for f in held]  # no defaults: a list or slice is not one
        lines += ["", "", f"{obj} = {cls}({', '.join(f'{f.name}={literal(f.value)}' for f in held)})"]
    held = frees_at(program, "namespace")
    if held:
        items = ", ".join(f"{f.name}={literal(f.value)}" for f in held)
        lines += ["", f"{OBJECTS['namespace'][0]} = types.SimpleNamespace({items})"]
    held = frees_at(program, "dict")
    if held:
        lines += ["", f"{OPTIONS} = {{{', '.join(f'{f.name!r}: {literal(f.value)}' for f in held)}}}"]
    lines += _render_packs(program)
    return lines


def _render_instances(program: Program) -> list[str]:
    """The module globals that statements spelled as modules call: each built
    once, from its statement's literals (generators.spellings)."""
    lines = []
    for b in program.blocks():
        for s in b.body:
            form = spelling(s.op, s.spelling)
            if form is not None and form.kind == "module":
                args = [literal(o.value) if isinstance(o, Const) else "" for o in s.operands]
                lines.append(f"{instance_name(b.name, s.out)} = {form.fmt.format(*args)}")
    return lines


def _render_packs(program: Program) -> list[str]:
    """The class of packed Python arguments, and one object per repeat."""
    b = program.block
    if not b.pack:
        return []
    calls = [c for s in program.sections for c in s.calls]
    if b.pack == "dataclass":
        head = ["", "@dataclass", f"class {PACK_CLASS}:", *(f"{IND}{a}: object" for a in b.args)]
        objs = [f"{PACK_CLASS}({', '.join(literal(v) for v in c.args)})" for c in calls]
        return [*head, "", "", f"{PACK_CLASS.upper()} = ({', '.join(objs)},)"]
    return ["", f"class {PACK_CLASS}(nn.Module):",
            f"{IND}def __init__(self, {', '.join(b.args)}):", f"{IND * 2}super().__init__()",
            *(f"{IND * 2}self.{a} = {a}" for a in b.args)]


def pack_ref(program: Program, j: int) -> str:
    """The object holding repeat ``j``'s packed arguments (counted over all sections)."""
    return f"{PACK_CLASS.upper()}[{j}]" if program.block.pack == "dataclass" else f"self.{PACK_CLASS.lower()}[{j}]"


def _closure(program: Program, lines: list[str]) -> list[str]:
    """Wrap the block's definition in a factory whose closure holds values
    (and, for function instances, the Python arguments of each repeat)."""
    cells = frees_at(program, "closure")
    b = program.block
    instances = b.kind == "function" and b.attrs
    if not cells and not instances:
        return lines
    made = "block" if b.kind == "function" else "Block"
    params = [f.name for f in cells] + (list(b.args) if instances else [])
    fixed = [literal(f.value) for f in cells]
    head = [f"def {FACTORY}({', '.join(params)}):", *(IND + line if line else line for line in lines),
            f"{IND}return {made}", "", ""]
    if not instances:
        return head + [f"{made} = {FACTORY}({', '.join(fixed)})"]
    calls = [c for s in program.sections for c in s.calls]
    made_calls = [f"{FACTORY}({', '.join(fixed + [literal(v) for v in c.args])})" for c in calls]
    return head + [f"{INSTANCES} = ({', '.join(made_calls)},)"]


def _render_block(program: Program) -> list[str]:
    lines = _closure(program, _render_block_def(program))
    if uses_form(program, "object:subclass_instance"):
        lines += ["", "", "class BlockSub(Block):", f"{IND}pass"]
    return lines


def _render_block_def(program: Program) -> list[str]:
    b = program.block
    module = b.kind == "module"
    state = {n for n, _ in (*b.weights, *b.buffers)}
    passed = [f.name for f in frees_at(program, "argument")]

    def operand(o) -> str:
        if isinstance(o, Const):
            return literal(o.value)
        if isinstance(o, Free):
            return free_read(program, o.name)
        if isinstance(o, Arg):
            if b.pack:
                return f"{PACKED}.{o.name}"
            return f"self.{o.name}" if b.attrs and module else o.name
        return f"self.{o.name}" if module and o.name in state else o.name

    hooks = _hooks(program)
    body = _unpack_extras(b) + hooks.pop("input", []) + _body_lines(program, b, operand, hooks)
    decorator = decorator_lines(b)
    inputs = [b.inputs[0], EXTRAS_PARAM] if EXTRA_PACKS[b.extras].packed else list(b.inputs)
    call_args = [] if b.attrs else [PACKED] if b.pack else list(b.args)

    if call_args and uses_form(program, "bind:default"):
        call_args[-1] += f"={literal(default_value(program))}"
    if b.takes:
        passed = [*passed, f"{GIVEN}=None"]
    if not module:
        params = [*inputs, *sorted(state, key=_state_order(program)), *call_args, *passed]
        return [*decorator, f"def block({', '.join(params)}):", *(IND + line for line in body)]

    init_params = "".join(f", {a}" for a in b.args) if b.attrs else ""
    lines = ["class Block(nn.Module):"]
    attrs = [f"{IND}{f.name} = {literal(f.value)}" for f in frees_at(program, "class_attr")]
    lines += [*attrs, ""] if attrs else []
    lines += [f"{IND}def __init__(self{init_params}):", f"{IND * 2}super().__init__()"]
    lines += [IND * 2 + line for line in _state_lines(b, "self") + _child_lines(program, b)]
    if b.attrs:
        lines += [f"{IND * 2}self.{a} = {a}" for a in b.args]
    fwd_params = [*inputs, *call_args, *passed]
    lines += ["", *(IND + d for d in decorator), f"{IND}def forward(self, {', '.join(fwd_params)}):"]
    return lines + [IND * 2 + line for line in body]


def hooked_values(program: Program) -> dict[str, str]:
    """The layer values a body feature (generators.autograd) hooks: its primary input, its first
    value (the first statement that is no sub-block call) and its result."""
    b = program.block
    first = next((st.out for st in b.body if st.op != CHILD), "")
    return {"input": b.inputs[0], "mid": first, "output": b.result}


def _hooks(program: Program) -> dict[str, list[str]]:
    """The layer's body-feature lines by where they go: "input" (after the extras are unpacked), the
    first value's name (after its statement), "" (at the result, before the return)."""
    values = hooked_values(program)
    out: dict[str, list[str]] = {}
    for n in program.options.autograd:
        f = AUTOGRAD[n]
        if f.place == "body":
            where = {"input": "input", "mid": values["mid"], "output": ""}[f.at]
            out.setdefault(where, []).extend(line.format(t=values[f.at], m=values["mid"]) for line in f.lines)
    return out


def _render_autograd(program: Program) -> list[str]:
    """The helpers, the context and the drive of the program's autograd features (generators.autograd)."""
    features = [AUTOGRAD[n] for n in program.options.autograd]
    if not features:
        return []
    defs: list[str] = []
    around = [f.lines[0] for f in features if f.place == "around"]
    if around:  # two of other families (a global module hook, saved tensors hooks): both entered
        defs += [f"def {CONTEXT}():\n{IND}return {around[0] if len(around) == 1 else '_contexts(' + ', '.join(around) + ')'}"]
    writes = any(f.writes for f in features)
    drives = [f for f in features if f.place == "drive" and f.lines]
    if writes or drives:
        backward = list(drives[0].lines if drives else DEFAULT_DRIVE)
        lines = [f"def {DRIVE}(outs, cots, leaves, inputs):"]
        if writes:
            lines += [f"{IND}_write(inputs)", f"{IND}try:", *(IND * 2 + x for x in backward),
                      f"{IND}except RuntimeError as e:", f"{IND * 2}if {INPLACE!r} not in str(e):", f"{IND * 3}raise",
                      f"{IND * 2}_record('error.inplace', torch.ones(()))"]
        else:
            lines += [IND + x for x in backward]
        defs.append("\n".join(lines))
    used = [line for f in features if f.place in ("body", "init", "forward") for line in f.lines] + defs
    return "\n\n\n".join([*autograd_helpers(used), *defs]).split("\n")


def uses_form(program: Program, name: str) -> bool:
    return any(c.how == name for s in program.sections for c in s.calls)


def _values(program: Program) -> list[Value]:
    """Every Python value the program writes, nested ones included."""
    out: list[Value] = []

    def walk(v: Value) -> None:
        out.append(v)
        for item in v if isinstance(v, tuple) else v.items if isinstance(v, PyList) else ():
            walk(item)

    for b in program.blocks():
        for stmt in b.body:
            for o in stmt.operands:
                if isinstance(o, Const):
                    walk(o.value)
    for f in program.frees:
        walk(f.value)
    for _, c in program.repeats():
        for v in (*c.args, *(v for _, v in c.sets)):
            walk(v)
    return out


def _prelude(program: Program) -> list[str]:
    """The classes and helpers the program's values and call-site forms need."""
    names = [f"{v.cls}:{base}" for v in _values(program) if isinstance(v, Sub) for base in [SUB_BASES[v.cls]]]
    lines = []
    for entry in dict.fromkeys(names):
        cls, base = entry.split(":")
        lines += [f"class {cls}({base}):", f"{IND}pass", "", ""]
    for name in dict.fromkeys(n for _, c in program.repeats() if c.how for n in FORMS[c.how].prelude):
        if PRELUDE[name]:
            lines += [PRELUDE[name], "", ""]
    if any(b.reuse == "hash" for b in program.blocks()):
        lines += [REUSE_KEY_DEF, "", ""]
    return lines[:-2]


def _unpack_extras(b: Block) -> list[str]:
    return EXTRA_PACKS[b.extras].unpack(list(b.inputs[1:])) if len(b.inputs) > 1 else []


def _render_given(program: Program) -> list[str]:
    """Module-level definitions what the layer is given needs: the class its
    extra tensors are packed in, the module classes a module take passes."""
    b = program.block
    lines = EXTRA_PACKS[b.extras].define(list(b.inputs[1:])) if len(b.inputs) > 1 else []
    if b.takes == "module":
        for d in MODULE_DEFS:
            lines += ["", "", d] if lines else [d]
    return lines


def _state_order(program: Program):
    order = [n for n, _ in (*program.block.weights, *program.block.buffers)]
    return order.index


# --- the Program module -----------------------------------------------------------


def instance_attr(program: Program, k: int, s: Section) -> str | None:
    """Attribute holding section ``k``'s module instances, if it has its own."""
    if program.block.kind != "module" or s.structure not in PER_INSTANCE:
        return None
    return f"layers{k}" if s.structure == "module_list" else f"m{k}"


def _render_init(program: Program) -> list[str]:
    b = program.block
    lines = ["class Program(nn.Module):", f"{IND}def __init__(self):", f"{IND * 2}super().__init__()"]
    body: list[str] = []
    if b.kind == "function":
        body += _state_lines(b, "self")
    else:
        if any(instance_attr(program, k, s) is None for k, s in enumerate(program.sections)):
            body.append("self.block = Block()")
        for k, s in enumerate(program.sections):
            attr = instance_attr(program, k, s)
            if attr is None:
                continue
            ctors = [f"Block({', '.join(literal(v) for v in c.args) if b.attrs else ''})" for c in s.calls]
            if s.structure == "module_list":
                body.append(f"self.{attr} = nn.ModuleList([{', '.join(ctors)}])")
                body += [f"self.{attr}[{i}].requires_grad_(False)" for i, c in enumerate(s.calls) if c.frozen]
            else:
                for i, (ctor, c) in enumerate(zip(ctors, s.calls)):
                    init = FORMS[c.how].init if c.how else ""
                    body.append(f"self.{attr}_{i} = {'BlockSub' + ctor[len('Block'):] if init == 'subclass' else ctor}")
                    if init == "method":
                        body.append(f"self.{attr}_{i}.forward = types.MethodType(Block.forward, self.{attr}_{i})")
                body += [f"self.{attr}_{i}.requires_grad_(False)" for i, c in enumerate(s.calls) if c.frozen]
    body += {"module": list(MODULE_INIT), "parameter": list(PARAMETER_INIT)}.get(b.takes, [])
    body += [line for n in program.options.autograd if AUTOGRAD[n].place == "init" for line in AUTOGRAD[n].lines]
    if b.pack == "module":
        calls = [c for s in program.sections for c in s.calls]
        objs = [f"{PACK_CLASS}({', '.join(literal(v) for v in c.args)})" for c in calls]
        body.append(f"self.{PACK_CLASS.lower()} = nn.ModuleList([{', '.join(objs)}])")
    return lines + [IND * 2 + line for line in body or ["pass"]]


# Column names for what varies between the repeats of one loop.
_CTX_VAR = {"grad": "g", "autocast": "ac", "inference": "inf", "default_dtype": "dd"}


def _tensor_expr(call: Call) -> str | None:
    return None if call.tensor is None else CALL_VIEWS[call.view][0].format(call.tensor)


def _ctx_value(field: str, v) -> str:
    return literal(DType(v)) if field == "default_dtype" else repr(v)


def _offset(program: Program, s: Section) -> int:
    """Index of ``s``'s first call among all sections' calls."""
    k = next(i for i, t in enumerate(program.sections) if t is s)
    return sum(len(t.calls) for t in program.sections[:k])


def _differs(values: list) -> bool:
    return len({repr(typed_key(v)) for v in values}) > 1


ALIAS_CODES = {"": 0, "same": 1, "view": 2}
# Writes to a program input between repeats, by mode (generators.ir.WRITES).
WRITE_LINES = {"direct": "{}.mul_(-0.5)", "view": "{}[..., :1].add_(1.0)"}


def _columns(program: Program, s: Section) -> list[tuple[str, list[str]]]:
    """(loop variable, per-call source) for everything that differs between calls."""
    b = program.block
    cols: list[tuple[str, list[str]]] = []
    over_values = s.structure in ("for_values", "for_tuple")
    if b.pack and b.args and (over_values or any(_differs([c.args[j] for c in s.calls]) for j in range(len(b.args)))):
        start = _offset(program, s)
        cols.append((PACKED, [pack_ref(program, start + i) for i in range(len(s.calls))]))
    elif not b.attrs:
        for j, name in enumerate(b.args):
            values = [c.args[j] for c in s.calls]
            if over_values or _differs(values):
                cols.append((name, [literal(v) for v in values]))
    for name in dict(s.calls[0].sets):
        values = [dict(c.sets)[name] for c in s.calls]
        if over_values or _differs(values):
            cols.append((f"set_{name}", [literal(v) for v in values]))
    tensors = [_tensor_expr(c) for c in s.calls]
    if len(set(tensors)) > 1:
        cols.append(("t", tensors))
    if len({c.alias for c in s.calls}) > 1:
        cols.append(("al", [str(ALIAS_CODES[c.alias]) for c in s.calls]))
    if len({c.given for c in s.calls}) > 1:
        variants = list(dict(TAKES[b.takes].variants))
        cols.append(("gv", [str(variants.index(c.given)) for c in s.calls]))
    for f in fields(Context):
        values = [getattr(c.context, f.name) for c in s.calls]
        if len(set(values)) > 1:
            cols.append((_CTX_VAR[f.name], [_ctx_value(f.name, v) for v in values]))
    return cols


def _context_lines(call: Call, cols: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(with-items, lines before, lines after) for one call's context."""
    ctx = call.context
    items: list[str] = []
    before: list[str] = []
    after: list[str] = []
    if ctx.grad is not None:
        if "g" in cols:
            items.append("torch.set_grad_enabled(g)")
        else:
            items.append("torch.enable_grad()" if ctx.grad else "torch.no_grad()")
    if ctx.inference is not None:
        items.append("torch.inference_mode(inf)" if "inf" in cols else f"torch.inference_mode({ctx.inference})")
    if ctx.autocast is not None:
        enabled = "ac" if "ac" in cols else repr(ctx.autocast)
        items.append(f'torch.autocast("cpu", dtype=torch.bfloat16, enabled={enabled})')
    if ctx.default_dtype is not None:
        dd = "dd" if "dd" in cols else literal(DType(ctx.default_dtype))
        before.append(f"torch.set_default_dtype({dd})")
        after.append("torch.set_default_dtype(torch.float32)")
    return items, before, after


def _extra_inputs(program: Program, call: Call, primary: str, cols: dict[str, str]) -> list[str]:
    """The extra tensor arguments of one call, as the block receives them."""
    b = program.block
    extras = list(b.inputs[1:])
    if extras and "al" in cols:
        extras[0] = f"({primary} if al == 1 else {primary}[..., :1] if al == 2 else {extras[0]})"
    elif extras and call.alias:
        extras[0] = primary if call.alias == "same" else f"{primary}[..., :1]"
    return EXTRA_PACKS[b.extras].call(list(zip(b.inputs[1:], extras))) if extras else []


def _given(program: Program, s: Section, call: Call, primary: str, cols: dict[str, str]) -> list[str]:
    """The keyword item passing the layer's taken argument in one call (none when it is left out)."""
    take = TAKES.get(program.block.takes)
    if take is None:
        return []
    if "gv" not in cols:
        return [] if take.expr(call.given, primary) == OMIT else [f"{GIVEN}={take.expr(call.given, primary)}"]
    present = [(i, v) for i, (v, _) in enumerate(take.variants) if any(c.given == v for c in s.calls)]
    expr = lambda v: take.expr(v, primary) or "None"  # noqa: E731 (left out in a loop: the default's value)
    chain = expr(present[-1][1])
    for i, v in reversed(present[:-1]):
        chain = f"{expr(v)} if gv == {i} else {chain}"
    return [f"{GIVEN}=({chain})"]


def _call_lines(program: Program, s: Section, call: Call, callee: str, cols: dict[str, str], j: int,
                reference: bool = False) -> list[str]:
    """The statements for one repeat (repeat ``j`` over all sections); ``cols``
    maps varying things to loop variables; ``reference``: a source door's
    plain-Python equivalent (generators.doors)."""
    b = program.block
    primary = "t" if "t" in cols else (_tensor_expr(call) or "h")
    tensors = [primary, *_extra_inputs(program, call, primary, cols)]
    if b.kind == "function":
        tensors += [f"self.{n}" for n, _ in (*b.weights, *b.buffers)]
    pyargs: list[tuple[str, str]] = []
    if b.pack:
        pyargs.append((PACKED, PACKED if PACKED in cols else pack_ref(program, j)))
    elif not b.attrs:
        for i, name in enumerate(b.args):
            pyargs.append((name, name if name in cols else literal(call.args[i])))
    passed = [f"{f.name}={f.name}" for f in frees_at(program, "argument")]
    passed += _given(program, s, call, primary, cols)
    site = Site(callee, tuple(tensors), tuple(pyargs), tuple(passed))
    door = source_door(program)
    if door is not None:  # the call as a one-argument function of its primary, through the door
        inner = _call_expr(s, call, replace(site, tensors=("_t", *site.tensors[1:])))
        expr = (door.reference if reference and door.reference else door.write)(_bound_lambda(inner), primary)
    else:
        expr = _call_expr(s, call, site)
    got, kept = [], []
    if b.returns != SINGLE:  # the result is carried on; the other item, if read, joins the outputs
        got = [f"{GOT} = {expr}"]
        kept = read_lines(b.returns, GOT, AUX, SEEN)
        expr = item(b.returns, GOT, 0)
    flow = {"chain": f"h = {expr}", "residual": f"h = h + {expr}", "fanout": f"outs.append({expr})"}[s.flow]
    items, before, after = _context_lines(call, set(cols))
    flow_lines = [*got, flow, *kept]
    lines = [f"{set_target(program, n, callee)} = {f'set_{n}' if f'set_{n}' in cols else literal(v)}"
             for n, v in call.sets]
    lines += before
    if items:
        lines += [f"with {', '.join(items)}:", *(IND + line for line in flow_lines)]
    else:
        lines += flow_lines
    lines += after
    if s.write:
        lines.append(WRITE_LINES[s.write[1]].format(s.write[0]))
    if s.interleave:
        lines += list(INTERLUDES[s.interleave].lines)
    return lines


def _bound_lambda(inner: str) -> str:
    """``lambda _t: inner`` with every other name it reads bound when it is
    made (default arguments): a door may call it again later (checkpointing
    recomputes in backward), after the loop or the forward has rebound them."""
    import ast
    import builtins

    names = sorted({n.id for n in ast.walk(ast.parse(inner, mode="eval")) if isinstance(n, ast.Name)}
                   - {"_t", *dir(builtins)})
    return f"lambda _t{''.join(f', {n}={n}' for n in names)}: {inner}"


def _call_expr(s: Section, call: Call, site: Site) -> str:
    if call.how:
        return FORMS[call.how].write(site)
    if s.keywords:
        return FORMS["bind:keyword"].write(site)
    return site.plain()


def _render_section(program: Program, k: int, s: Section, reference: bool = False) -> list[str]:
    if s.bracket:  # the calls' one context entered once around them
        items, before, after = _context_lines(s.calls[0], set())
        bare = replace(s, calls=tuple(replace(c, context=Context()) for c in s.calls), bracket=False)
        inner = _render_section(replace(program, sections=(*program.sections[:k], bare, *program.sections[k + 1:])),
                                k, bare, reference)
        return [*before, f"with {', '.join(items)}:", *(IND + line for line in inner), *after] if items else \
            [*before, *inner, *after]
    b = program.block
    attr = instance_attr(program, k, s)
    shared = "block" if b.kind == "function" else "self.block"
    start = _offset(program, s)
    if s.structure == "calls":
        lines = []
        for i, call in enumerate(s.calls):
            callee = f"self.{attr}_{i}" if attr else f"{INSTANCES}[{start + i}]" if b.attrs else shared
            lines += _call_lines(program, s, call, callee, {}, start + i, reference)
        return lines

    cols = _columns(program, s)
    names = {name: name for name, _ in cols}
    rows = [tuple(src[i] for _, src in cols) for i in range(len(s.calls))]
    unpack = ", ".join(names)

    def table(open_: str = "[", close: str = "]") -> str:
        items = [row[0] if len(row) == 1 else f"({', '.join(row)})" for row in rows]
        if open_ == "(" and len(items) == 1:
            return f"({items[0]},)"
        return f"{open_}{', '.join(items)}{close}"

    def body(callee: str, index: str | None) -> list[str]:
        pick = [f"{unpack} = {table()}[{index}]"] if cols and index else []
        return pick + _call_lines(program, s, s.calls[0], callee, names, start, reference)

    n = len(s.calls)
    if s.structure == "module_list":
        target = unpack if len(cols) == 1 else f"({unpack})"
        head = f"for blk, {target} in zip(self.{attr}, {table()}):" if cols else f"for blk in self.{attr}:"
        return [head, *(IND + line for line in body("blk", None))]
    if s.structure in ("for_values", "for_tuple"):
        head = f"for {unpack} in {table() if s.structure == 'for_values' else table('(', ')')}:"
        return [head, *(IND + line for line in body(shared, None))]
    if s.structure == "for_range":
        return [f"for i in range({n}):", *(IND + line for line in body(shared, "i"))]
    if s.structure == "while":
        return ["i = 0", f"while i < {n}:", *(IND + line for line in body(shared, "i")), IND + "i += 1"]
    # nested: an outer counted loop around an inner loop over the calls
    inner = f"for {unpack} in {table()}:" if cols else f"for j in range({n}):"
    return [
        f"for _ in range({s.outer}):",
        IND + inner,
        *(IND * 2 + line for line in body(shared, None)),
    ]


def _render_forward(program: Program, reference: bool = False) -> list[str]:
    names = [n for n, _ in program.inputs]
    names += [f"{f.name}={literal(f.value)}" for f in frees_at(program, "argument")]
    lines = [f"def forward(self, {', '.join(names)}):"]
    rebound = sorted({global_name(n) for c in program.repeats() for n, _ in c[1].sets
                      if next(f.home for f in program.frees if f.name == n) == "global"})
    if rebound:
        lines.append(f"{IND}global {', '.join(rebound)}")
    head = len(lines)
    lines.append(f"{IND}h = {program.inputs[0][0]}")
    fanout = any(s.flow == "fanout" for s in program.sections)
    if fanout:
        lines.append(f"{IND}outs = []")
    aux = reads_second(program.block.returns)
    if aux:
        lines.append(f"{IND}{AUX} = []")
    if aux and RETURNS[program.block.returns].alternate:
        lines.append(f"{IND}{SEEN} = []")
    for k, s in enumerate(program.sections):
        if k and program.interludes[k - 1]:
            lines += [IND + line for line in INTERLUDES[program.interludes[k - 1]].lines]
        lines += [IND + line for line in _render_section(program, k, s, reference)]
    returns = {
        "single": "h",
        "tuple": "(" + ", ".join(["h", *(["*outs"] if fanout else []), *([f"*{AUX}"] if aux else [])])
                 + ("" if fanout or aux else ",") + ")",
        "dict": "{" + ", ".join(['"h": h', *(['"outs": outs'] if fanout else []), *([f'"{AUX}": {AUX}'] if aux else [])]) + "}",
    }
    lines.append(f"{IND}return {returns[program.outputs]}")
    around = [AUTOGRAD[n].lines[0] for n in program.options.autograd if AUTOGRAD[n].place == "forward"]
    if around:  # the whole body, its return included, under the feature's context (generators.autograd)
        lines[head:] = [f"{IND}with {around[0]}:", *(IND + line for line in lines[head:])]
    return lines


GOT = "got"  # what a layer call returned, when it returns more than its result
AUX = "aux"  # the other items layer calls returned, which the program returns too
SEEN = "seen"  # the layer calls made so far, where every other one keeps its second item


def input_expr(spec: TensorSpec, device: str = "") -> str:
    """``device``: an expression for the device keyword (none: the default device)."""
    dtype = f"dtype=torch.{spec.dtype}" + (f", device={device}" if device else "")
    s = spec.shape
    if spec.data is not None:
        return f"torch.tensor({literal(tuple(spec.data))}, {dtype}).reshape({_shape(s)})"
    if spec.layout == "transposed":
        swapped = s[:-2] + (s[-1], s[-2])
        return f"torch.randn({_shape(swapped)}, {dtype}).transpose(-1, -2)"
    if spec.layout == "strided":
        return f"torch.randn({_shape(s[:-1] + (2 * s[-1],))}, {dtype})[..., ::2]"
    if spec.layout == "expanded":
        return f"torch.randn({_shape((1,) + s[1:])}, {dtype}).expand({_shape(s)})"
    return f"torch.randn({_shape(s)}, {dtype})"


def render_inputs(program: Program, name: str = "make_inputs") -> list[str]:
    """``make_inputs(device)`` (or a function of another ``name``) for ``program``'s inputs."""
    lines = [f'def {name}(device="cpu"):']
    for name, spec in program.inputs:
        lines.append(f"{IND}{name} = {input_expr(spec, 'device')}.requires_grad_({spec.requires_grad})")
    for name, dim, strict in program.options.mark_dynamic:
        fn = "mark_dynamic" if strict else "maybe_mark_dynamic"
        lines.append(f"{IND}torch._dynamo.{fn}({name}, {dim})")
    lines.append(f"{IND}return [{', '.join(n for n, _ in program.inputs)}]")
    return lines


def compile_kwargs(program: Program) -> dict:
    """The torch.compile options the program asks for."""
    kwargs: dict = {"fullgraph": program.options.fullgraph}
    if program.options.dynamic is not None:
        kwargs["dynamic"] = program.options.dynamic
    return kwargs


def header(program: Program) -> str:
    """The imports: torch, and the standard library modules the program's objects need."""
    extra = []
    if program.block.pack == "dataclass" or frees_at(program, "dataclass"):
        extra.append("from dataclasses import dataclass")
    forms = [FORMS[c.how] for _, c in program.repeats() if c.how]
    door = source_door(program)
    if any("functools" in f.imports for f in forms) or (door is not None and "functools" in door.imports):
        extra.append("import functools")
    if frees_at(program, "namespace") or any("types" in f.imports for f in forms) or program.block.takes == "module":
        extra.append("import types")
    if len(program.block.inputs) > 1:
        extra += [{"collections": "import collections", "dataclasses": "from dataclasses import dataclass"}[m]
                  for m in EXTRA_PACKS[program.block.extras].imports
                  if not (m == "dataclasses" and "from dataclasses import dataclass" in extra)]
    return "\n".join([*extra, HEADER])


def render(program: Program, reference: bool = False, state: bool = True) -> str:
    """Python source for ``program``; raises MalformedProgram if it is invalid.
    ``reference``: a source door written as its plain-Python equivalent; ``state``: with the functions the
    harness reads and resets the Python state the forward writes through (PYTHON_STATE; a bug report
    compares outputs only and leaves them out)."""
    check(program)
    if program.options.door and program.options.door not in DOORS:
        raise MalformedProgram(f"unknown door {program.options.door!r}: use one of {', '.join(DOORS)}")
    forward = _render_forward(program, reference)
    door = source_door(program)
    parts = [
        header(program),
        "\n".join(_prelude(program)),
        "\n".join(_render_autograd(program)),
        *(DOOR_PRELUDE[n] for n in (door.prelude if door is not None else ())),
        "\n".join(_render_globals(program)),
        "\n".join(_render_python_state(program) if state else []),
        "\n".join(_render_given(program)),
        "\n".join(_render_instances(program)),
        *("\n".join(_render_sub(program, b)) for b in reversed(program.subs)),
        "\n".join(_render_block(program)),
        "\n".join(_render_init(program) + [""] + [IND + line for line in forward]),
        "\n".join(render_inputs(program)),
    ]
    return "\n\n\n".join(p for p in parts if p) + "\n"
