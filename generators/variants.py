"""One change between two calls of a compiled program: what its guards must see.

A variant is a change written as Python statements, run between the first
call of the compiled program and the next, in a namespace that holds the
program's module globals, ``model`` (the ``Program`` instance), ``inputs``
(the tensors passed positionally), ``kwargs`` (keyword arguments of
``forward``) and ``cell`` (see PRELUDE); ``undo`` puts things back. The text
is a pure function of the program, so the harness runs and the standalone
repro prints the very same statements.

Which changes a program supports is the generator's to say: a change to an
input's shape, dtype or layout, to a Python value, or to the global state a
program runs under is offered only if the program with that change still
passes ``check``. A ``neutral`` change (new tensor values, a parameter
replaced by another of its shape) cannot change what the program computes,
so it must not force a recompile (unless a size the program computes follows
the values: ``check.sizes_follow_values``); any other change may only reuse a cached
graph if the guards prove it still right.

A kind reads ``family:what[:qualifier]``. Python values change in every
place they live (free values in each home, instance attributes, function
instances' cells, fields of packed objects), each to another value, to one
of another type, and at the edges (QUALIFIERS): the other signed zero and
NaN (the "edge" family: what a guard comparing floats with ``==`` gets
wrong), another length, another callable. Function objects are remade with
the same code ("closure:remake"); module instances are replaced by every
route Python offers ("module:replace:<route>") or loaded with new values
("module:load_state_dict"); a program input is made the same tensor as, or
a view of, input 0 ("input:alias:make", "input:alias:view"); under the
setting that has Dynamo guard on module hooks, a hook is registered on a block
instance ("hook:forward", "hook:forward_pre", "hook:forward_kwargs",
"hook:backward_pre"), a gradient hook on a parameter ("hook:param_grad"), or
every module hook removed ("hook:remove").
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable, Optional

from .check import check, mutation_rules, sizes_follow_values
from .codegen import (CHILDREN, FACTORY, INSTANCES, OBJECTS, OPTIONS, PACKED, SETTINGS, _columns, free_read, frees_at,
                      global_name, input_expr, instance_attr, literal, pack_ref, sub_callable)
from .settings import patches
from .ir import FLOATS, LAYOUTS, Arg, Fn, Free, FreeVar, MalformedProgram, Program, PyList, TensorSpec, Value, typed_key
from .values import equal_values
from .ops import OPS, S, slot_values

PRELUDE = '''\
def cell(fn, name):
    """The closure cell of ``fn`` (or of a function it wraps) holding ``name``."""
    todo = [fn]
    while todo:
        f = todo.pop()
        if name in f.__code__.co_freevars:
            return f.__closure__[f.__code__.co_freevars.index(name)]
        todo += [c.cell_contents for c in f.__closure__ or () if hasattr(c.cell_contents, "__code__")]
    raise LookupError(name)
'''


@dataclass(frozen=True)
class Variant:
    kind: str  # family:what[:qualifier], e.g. "input:dtype", "free:global:type" (see FAMILIES)
    target: str  # what changes, as the program's reader sees it
    description: str
    apply: tuple[str, ...]
    undo: tuple[str, ...] = ()
    neutral: bool = False
    dtype: str = ""  # a floating dtype the change brings into the computation, if any

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> "Variant":
        return Variant(**{f.name: tuple(d[f.name]) if f.name in ("apply", "undo") else d[f.name]
                          for f in fields(Variant) if f.name in d})


def _assign(kind: str, target: str, old: Value, new: Value) -> Variant:
    return Variant(kind, target, f"{target}: {literal(old)} -> {literal(new)}",
                   (f"_saved = {target}", f"{target} = {literal(new)}"), (f"{target} = _saved",))


# --- where things live in a program --------------------------------------------


def instances(program: Program) -> list[str]:
    """Expressions for the block's module instances, in section order."""
    if program.block.kind != "module":
        return []
    out: list[str] = []
    for k, s in enumerate(program.sections):
        attr = instance_attr(program, k, s)
        if attr is None:
            out.append("model.block")
        elif s.structure == "module_list":
            out += [f"model.{attr}[{i}]" for i in range(len(s.calls))]
        else:
            out += [f"model.{attr}_{i}" for i in range(len(s.calls))]
    return list(dict.fromkeys(out))


def _owner(program: Program) -> str:
    """Where the block's parameters and buffers live (the last instance)."""
    found = instances(program)
    return found[-1] if found else "model"


def _free_targets(program: Program, name: str) -> list[str]:
    """Where free value ``name`` is bound: one expression, or one per
    function instance for a closure cell of function instances (each made
    by its own factory call, so each has its own cell)."""
    home = next(f.home for f in program.frees if f.name == name)
    b = program.block
    module = b.kind == "module"
    if home == "closure" and not module and b.attrs:
        return [f"cell({INSTANCES}[{j}], {name!r}).cell_contents" for j in range(len(_calls(program)))]
    return [{
        "global": global_name(name),
        "closure": f"cell({'Block.forward' if module else 'block'}, {name!r}).cell_contents",
        "class_attr": f"{'Block' if module else SETTINGS}.{name}",
        "argument": f"kwargs[{name!r}]",
        "dataclass": free_read(program, name),
        "namespace": free_read(program, name),
        "dict": f"{OPTIONS}[{name!r}]",
    }[home]]


def valid(program: Program) -> bool:
    try:
        check(program)
        return True
    except MalformedProgram:
        return False


def _slot_choices(program: Program, operand) -> list[Value]:
    """Values every slot reading ``operand`` accepts in every repeat."""
    found: Optional[list[Value]] = None
    for scope in check(program):
        for stmt in program.block.body:
            op = OPS[stmt.op]
            for slot, o in zip(op.slots, stmt.operands):
                if o == operand and isinstance(slot, S):
                    choices = list(slot_values(slot, scope[stmt.operands[0].name]))
                    keys = {repr(typed_key(v)) for v in choices}
                    found = choices if found is None else [v for v in found if repr(typed_key(v)) in keys]
    return found or []


# What a new value is, next to the old one: the last part of a kind.
# "" another value of the same type; "type" a value of another type;
# "sign" the other signed zero (0.0 <-> -0.0, equal under ==); "nan" NaN
# (unequal even to itself); "length" a list or tuple of another length;
# "callable" another function.
QUALIFIERS = ("", "type", "sign", "nan", "length", "callable")
EDGES = ("sign", "nan")  # the changes a guard comparing floats with == gets wrong


def qualifier(old: Value, new: Value) -> str:
    if type(new) is not type(old):
        return "type"
    if isinstance(old, Fn):
        return "callable"
    if isinstance(old, float) and old == old:
        if new != new:
            return "nan"
        if old == 0.0 and new == 0.0:
            return "sign"
    if isinstance(old, (tuple, PyList)):
        size = len(old.items if isinstance(old, PyList) else old)
        if len(new.items if isinstance(new, PyList) else new) != size:
            return "length"
    return ""


def _alternatives(program: Program, operand, old: Value, rebuild: Callable[[Value], Program]) -> dict[str, Value]:
    """Per qualifier (QUALIFIERS), the first new value the slots reading
    ``operand`` accept and the program still type-checks with (for "type",
    a value equal to the old one under ``==`` where the slots take one)."""
    out: dict[str, Value] = {}
    # an equal value of another type first (2 -> 2.0, True -> 1): what a guard comparing with == takes for the old
    equal = {repr(typed_key(v)) for v in equal_values(old)}
    for v in sorted(_slot_choices(program, operand), key=lambda v: repr(typed_key(v)) not in equal):
        if typed_key(v) == typed_key(old):
            continue
        q = qualifier(old, v)
        if q not in out and valid(rebuild(v)):
            out[q] = v
    return dict(sorted(out.items(), key=lambda item: QUALIFIERS.index(item[0])))


def _kind(*parts: str) -> str:
    return ":".join(p for p in parts if p)


def _rebound(program: Program) -> set[str]:
    """Free values the forward rebinds before every repeat (Call.sets): a
    change to them is overwritten before anything reads it."""
    return {n for _, c in program.repeats() for n, _ in c.sets}


def _calls(program: Program) -> list[tuple[int, int]]:
    """(section, call) of every call row, over all sections."""
    return [(k, i) for k, s in enumerate(program.sections) for i in range(len(s.calls))]


def _with_args(program: Program, rows: list[tuple[int, int]], j: int, v: Value) -> Program:
    """``program`` with argument ``j`` of the call rows ``rows`` set to ``v``."""
    sections = []
    for k, s in enumerate(program.sections):
        calls = tuple(replace(c, args=tuple(v if n == j else a for n, a in enumerate(c.args)))
                      if (k, i) in rows else c for i, c in enumerate(s.calls))
        sections.append(replace(s, calls=calls))
    return replace(program, sections=tuple(sections))


def _per_argument(program: Program, rows: list[tuple[int, int]]) -> dict[str, tuple[str, Value, Value]]:
    """Per qualifier, the first block argument (name, old value, new value)
    the call rows ``rows`` (which share one value source) can change to."""
    k, i = rows[0]
    call = program.sections[k].calls[i]
    found: dict[str, tuple[str, Value, Value]] = {}
    for j, name in enumerate(program.block.args):
        def rebuild(v: Value, j=j) -> Program:
            return _with_args(program, rows, j, v)

        for q, new in _alternatives(program, Arg(name), call.args[j], rebuild).items():
            found.setdefault(q, (name, call.args[j], new))
    return dict(sorted(found.items(), key=lambda item: QUALIFIERS.index(item[0])))


# --- the catalogue: one builder per kind ---------------------------------------


REPEAT = Variant("repeat", "nothing", "the same call again", (), (), neutral=True)


def _repeat(program: Program) -> list[Variant]:
    return [REPEAT]


def _make_input(program: Program, i: int, spec: TensorSpec) -> list[str]:
    name = program.inputs[i][0]
    lines = [f"inputs[{i}] = {input_expr(spec)}.requires_grad_({spec.requires_grad})"]
    for marked, dim, strict in program.options.mark_dynamic:
        if marked == name:
            lines.append(f"torch._dynamo.{'mark_dynamic' if strict else 'maybe_mark_dynamic'}(inputs[{i}], {dim})")
    return lines


def _input_values(program: Program) -> list[Variant]:
    name, spec = program.inputs[0]
    return [Variant("input:values", name, f"{name}: new values", tuple(_make_input(program, 0, spec)), (),
                    not sizes_follow_values(program))]


def grown(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """``shape`` with one dim one larger, last dim first."""
    return [shape[:d] + (shape[d] + 1,) + shape[d + 1:] for d in reversed(range(len(shape)))]


def _respecs(spec: TensorSpec) -> dict[str, list[TensorSpec]]:
    shape = spec.shape
    return {
        "input:shape": [replace(spec, shape=s) for s in grown(shape)],
        "input:rank": [replace(spec, shape=(2, *shape))] + ([replace(spec, shape=shape[1:])] if len(shape) > 1 else []),
        "input:dtype": [replace(spec, dtype=d) for d in FLOATS if d != spec.dtype],
        "input:layout": [replace(spec, layout=lay) for lay in LAYOUTS if lay != spec.layout],
        "input:requires_grad": [replace(spec, requires_grad=not spec.requires_grad)],
    }


def _input_meta(program: Program) -> list[Variant]:
    """Per input and tensor attribute, the first change the program accepts."""
    out = []
    for i, (name, spec) in enumerate(program.inputs):
        for kind, candidates in _respecs(spec).items():
            for new in candidates:
                inputs = tuple((n, new if j == i else s) for j, (n, s) in enumerate(program.inputs))
                if valid(replace(program, inputs=inputs)):
                    attr = "shape" if kind == "input:rank" else kind.split(":")[1]
                    old_v, new_v = getattr(spec, attr), getattr(new, attr)
                    out.append(Variant(kind, name, f"{name}: {attr} {old_v} -> {new_v}",
                                       tuple(_make_input(program, i, new)),
                                       dtype=new.dtype if kind == "input:dtype" else ""))
                    break
    return out


def _assign_all(kind: str, targets: list[str], old: Value, new: Value) -> Variant:
    if len(targets) == 1:
        return _assign(kind, targets[0], old, new)
    return Variant(kind, targets[0], f"{' and '.join(targets)}: {literal(old)} -> {literal(new)}",
                   (f"_saved = [{', '.join(targets)}]", *(f"{t} = {literal(new)}" for t in targets)),
                   tuple(f"{t} = _saved[{j}]" for j, t in enumerate(targets)))


def _replace_object(program: Program, f: FreeVar, new: Value, qualifier: str) -> Variant:
    """The object holding ``f`` (CONFIG, STATE) replaced by a new one that
    holds ``new`` in ``f``'s field and the old object's other fields."""
    obj, cls = OBJECTS[f.home]
    make = cls or "types.SimpleNamespace"
    fields_ = ", ".join(f"{g.name}={literal(new) if g is f else f'{obj}.{g.name}'}" for g in frees_at(program, f.home))
    return Variant(_kind("free", f.home, qualifier), obj,
                   f"{obj} replaced by a new {make} with {f.name}: {literal(f.value)} -> {literal(new)}",
                   (f"_saved = {obj}", f"{obj} = {make}({fields_})"), (f"{obj} = _saved",))


def _frees(program: Program) -> list[Variant]:
    """Free values rebound (a global, a closure cell, a class attribute, a
    ``forward`` argument, a new CONFIG or STATE object), or the field of
    their object changed ("object:dataclass", "object:namespace", "object:dict"),
    or a key nothing reads added to the dict (neutral: "object:dict:unread"; not where the forward stores
    into the dict, since Dynamo guards the keys of a dict a frame mutates: dicts.py's "conservative"
    DICT_KEYS_MATCH, a recompile by design, seen as len(G['OPTS']) == 1)."""
    out = []
    rebound = _rebound(program)
    if frees_at(program, "dict") and not any(f.name in rebound for f in frees_at(program, "dict")):
        out.append(Variant("object:dict:unread", OPTIONS, f"a key nothing reads added to {OPTIONS}",
                           (f"{OPTIONS}['unread'] = 1",), (f"del {OPTIONS}['unread']",), True))
    for f in program.frees:
        if f.name in rebound:
            continue

        def rebuild(v: Value, f=f) -> Program:
            return replace(program, frees=tuple(replace(g, value=v) if g is f else g for g in program.frees))

        targets = _free_targets(program, f.name)
        for q, new in _alternatives(program, Free(f.name), f.value, rebuild).items():
            if f.home == "dict":  # the item of the same dict, or the dict replaced by a new one with it
                if f.default and not q and valid(rebuild(f.default[0])):  # its key taken out: read as the default
                    out.append(Variant("object:dict:removed", targets[0], f"{targets[0]} removed: the block reads "
                                       f"its default {literal(f.default[0])} for {literal(f.value)}",
                                       (f"_saved = {OPTIONS}.pop({f.name!r})",), (f"{targets[0]} = _saved",)))
                out.append(_assign(_kind("object", "dict", q), targets[0], f.value, new))
                out.append(Variant(_kind("free", "dict", q), OPTIONS, f"{OPTIONS} replaced by a new dict with "
                                   f"{f.name}: {literal(f.value)} -> {literal(new)}",
                                   (f"_saved = {OPTIONS}", f"{OPTIONS} = {{**{OPTIONS}, {f.name!r}: {literal(new)}}}"),
                                   (f"{OPTIONS} = _saved",)))
                continue
            if f.home in OBJECTS:
                out.append(_assign(_kind("object", f.home, q), targets[0], f.value, new))
                out.append(_replace_object(program, f, new, q))
                continue
            kind = _kind("free", f.home, q)
            if f.home == "argument":
                out.append(Variant(kind, targets[0], f"argument {f.name}: {literal(f.value)} -> {literal(new)}",
                                   (f"{targets[0]} = {literal(new)}",), ("kwargs.clear()",)))
            else:
                out.append(_assign_all(kind, targets, f.value, new))
            if f.home == "class_attr" and program.block.kind == "module" and not q:
                inst = instances(program)[-1]
                out.append(Variant("free:class_attr:shadow", f"{inst}.{f.name}",
                                   f"{inst}.{f.name} = {literal(new)} shadows Block.{f.name} = {literal(f.value)}",
                                   (f"{inst}.{f.name} = {literal(new)}",), (f"del {inst}.{f.name}",)))
    return out


def _attrs(program: Program) -> list[Variant]:
    """Python arguments held as module-instance attributes: change one
    instance's (the last one's), one variant per qualifier."""
    b = program.block
    if not b.attrs or not b.args or b.kind != "module":
        return []
    out = []
    inst = instances(program)[-1]
    for q, (name, old, new) in _per_argument(program, _calls(program)[-1:]).items():
        out.append(_assign(_kind("attr:instance", q), f"{inst}.{name}", old, new))
        if not q:
            out.append(_assign("attr:instance:dict", f"{inst}.__dict__[{name!r}]", old, new))
    return out


def _closure_args(program: Program) -> list[Variant]:
    """Python arguments captured by function instances (BLOCKS, one factory
    call per repeat): change the last instance's cell."""
    b = program.block
    if not b.attrs or not b.args or b.kind != "function":
        return []
    j = len(_calls(program)) - 1
    return [_assign(_kind("attr:closure", q), f"cell({INSTANCES}[{j}], {name!r}).cell_contents", old, new)
            for q, (name, old, new) in _per_argument(program, _calls(program)[-1:]).items()]


def _pack_rows(program: Program) -> list[tuple[int, int]]:
    """The call rows whose repeats read the first packed object (ARGS[0],
    self.args[0]): the first call; and every call of the first section when
    its loop reads one object for all repeats (no per-repeat column)."""
    s = program.sections[0]
    if s.structure != "calls" and PACKED not in dict(_columns(program, s)):
        return [(0, i) for i in range(len(s.calls))]
    return [(0, 0)]


def _packs(program: Program) -> list[Variant]:
    """A field of a packed-arguments object changed, the object the same:
    ``ARGS[0].s0 = new`` (a dataclass) or ``model.args[0].s0 = new`` (a module)."""
    b = program.block
    if not b.pack:
        return []
    obj = pack_ref(program, 0).replace("self.", "model.")
    return [_assign(_kind("object:pack", b.pack, q), f"{obj}.{name}", old, new)
            for q, (name, old, new) in _per_argument(program, _pack_rows(program)).items()]


def _factory_call(program: Program, j: Optional[int]) -> str:
    """The factory call codegen writes for the block (function instances:
    for repeat ``j``), with the program's values."""
    fixed = [literal(f.value) for f in frees_at(program, "closure")]
    if j is not None:
        k, i = _calls(program)[j]
        fixed += [literal(v) for v in program.sections[k].calls[i].args]
    return f"{FACTORY}({', '.join(fixed)})"


def _closure_remake(program: Program) -> list[Variant]:
    """A new function object with the same code and the same captured
    values: ``block`` (or one of BLOCKS) rebound to a fresh factory call;
    for a module block, a new ``Block`` class, whose instance (holding the
    last instance's state) takes that instance's place. May recompile."""
    b = program.block
    instances_ = b.kind == "function" and b.attrs
    if not frees_at(program, "closure") and not instances_:
        return []
    if instances_:
        j = len(_calls(program)) - 1
        made = _factory_call(program, j)
        return [Variant("closure:remake", f"{INSTANCES}[{j}]", f"{INSTANCES}[{j}] rebound to a new {made}",
                        (f"_saved = {INSTANCES}",
                         f"{INSTANCES} = {INSTANCES}[:{j}] + ({made},) + {INSTANCES}[{j + 1}:]"),
                        (f"{INSTANCES} = _saved",))]
    made = _factory_call(program, None)
    if b.kind == "function":
        return [Variant("closure:remake", "block", f"block rebound to a new {made}",
                        ("_saved = block", f"block = {made}"), ("block = _saved",))]
    inst = instances(program)[-1]
    parent, name, _ = _slot(inst)
    new = _constructor(program, inst, "Block")
    return [Variant("closure:remake", "Block",
                    f"Block rebound to a new {made}; {inst} replaced by its instance with the same state",
                    ("_saved_class = Block", f"_saved = {inst}", f"Block = {made}", f"_new = {new}",
                     "_new.load_state_dict(_saved.state_dict())", *_same_flags(),
                     f"{parent}._modules[{name!r}] = _new"),
                    (f"{parent}._modules[{name!r}] = _saved", "Block = _saved_class"))]


# --- module instances replaced, by every route Python offers --------------------


def _slot(expr: str) -> tuple[str, str, str]:
    """(parent, name in its _modules, container kind or "") of a module
    expression: ``a.b`` -> (a, b, ""), ``a[1]`` -> (a, "1", "list"),
    ``a['k']`` -> (a, k, "dict")."""
    if expr.endswith("]"):
        parent, key = expr[:-1].rsplit("[", 1)
        if key.startswith("'"):
            return parent, key.strip("'"), "dict"
        return parent, key, "list"
    parent, name = expr.rsplit(".", 1)
    return parent, name, ""


def _layer_args(program: Program, inst: str) -> tuple[Value, ...]:
    """The constructor arguments of layer instance ``inst`` (attrs blocks)."""
    if not program.block.attrs:
        return ()
    for k, s in enumerate(program.sections):
        attr = instance_attr(program, k, s)
        for i, c in enumerate(s.calls):
            if inst in (f"model.{attr}[{i}]", f"model.{attr}_{i}"):
                return c.args
    return ()


def _constructor(program: Program, inst: str, cls: str) -> str:
    return f"{cls}({', '.join(literal(v) for v in _layer_args(program, inst))})"


def _same_flags() -> tuple[str, ...]:
    """Lines giving ``_new`` the frozen state and training flag of ``_saved``."""
    return ("for _p, _q in zip(_new.parameters(), _saved.parameters()): _p.requires_grad_(_q.requires_grad)",
            "_new.train(_saved.training)")


def module_targets(program: Program) -> list[tuple[str, str]]:
    """(expression, constructor) of the module instances a route may
    replace: the block's last instance, and that instance's first module
    child (a sub-block instance, held as ``Block.holder`` says)."""
    b = program.block
    if b.kind != "module":
        return []
    inst = instances(program)[-1]
    out = [(inst, _constructor(program, inst, "Block"))]
    modules = [i for i in b.instances() if program.sub(i[0]).kind == "module"]
    if modules:
        name, slot = modules[0]
        attr = f"{name}_{slot}"
        where = {"attr": f"{inst}.{attr}", "module_dict": f"{inst}.{CHILDREN}[{attr!r}]"}.get(
            b.holder, f"{inst}.{CHILDREN}[0]")
        out.append((where, f"{sub_callable(name, 'module')}()"))
    return out


def _routes(parent: str, name: str, container: str) -> dict[str, tuple[str, ...]]:
    """Per route, the statements putting ``_new`` in ``parent``'s place ``name``."""
    index = f"[{name!r}]" if container == "dict" else f"[{name}]"
    out = {
        "setattr": (f"{parent}.{name} = _new" if name.isidentifier() else f"setattr({parent}, {name!r}, _new)",),
        "modules_dict": (f"{parent}._modules[{name!r}] = _new",),
        "add_module": (f"{parent}.add_module({name!r}, _new)",),
    }
    if not container:  # a container's order is its meaning: delattr would move the child to the end
        out["delattr"] = (f"delattr({parent}, {name!r})", f"setattr({parent}, {name!r}, _new)")
    else:
        out["container"] = (f"{parent}{index} = _new",)
    return out


def _modules(program: Program) -> list[Variant]:
    """A module instance replaced by a fresh instance of its class (new
    weights, the old one's frozen state and training flag), one kind per
    route: setattr, ``_modules[name] =``, ``add_module``, ``delattr`` then
    setattr, container item assignment; and ``load_state_dict`` of a fresh
    instance's state (the same objects, all values new). Undo puts the old
    instance back in its place (and ``_modules`` in its order). Where the program's autograd features hook
    its instances (generators.autograd, the module family) the fresh one takes the old one's hooks: a hook
    removed after a compile is not noticed unless Dynamo guards on hooks, as torch documents
    (``skip_nnmodule_hook_guards``), so the change is the instance, not its hooks."""
    out = []
    hooked = any(a.startswith("module.") for a in program.options.autograd)
    keep = tuple(f"_new.{d}.update(_saved.{d})" for d in HOOK_DICTS) if hooked else ()
    for expr, ctor in module_targets(program):
        parent, name, container = _slot(expr)
        for route, lines in _routes(parent, name, container).items():
            out.append(Variant(f"module:replace:{route}", expr, f"{expr} replaced by a fresh {ctor} via {lines[-1]}",
                               ("_order = dict(" + parent + "._modules)", f"_saved = {expr}", f"_new = {ctor}",
                                *_same_flags(), *keep, *lines),
                               (f"{parent}._modules.clear()", f"{parent}._modules.update(_order)")))
        out.append(Variant("module:load_state_dict", expr, f"{expr}.load_state_dict(a fresh {ctor}'s state)",
                           (f"_saved = {{k: v.detach().clone() for k, v in {expr}.state_dict().items()}}",
                            f"{expr}.load_state_dict({ctor}.state_dict())"),
                           (f"{expr}.load_state_dict(_saved)",)))
    return out


def _module_attrs(program: Program) -> list[Variant]:
    """Attributes no generated program reads: neutral by construction (the
    generated dropout and batch norm pass training=True explicitly)."""
    return [
        Variant("attr:unread", "model.note", "a new attribute nothing reads", ("model.note = 'unread'",),
                ("del model.note",), True),
        Variant("attr:training", "model.training", "model.eval() (no op reads the training flag)",
                ("model.eval()",), ("model.train()",), True),
    ]


# Hooks added between calls (kind -> registration on ``{t}``): each changes what the module computes, so eager
# differs after it wherever the hook reaches a floating tensor. Lambdas, so a repro's change is self-contained.
_FLOAT = "isinstance({v}, torch.Tensor) and {v}.is_floating_point()"
HOOK_ADDS: dict[str, tuple[str, str]] = {
    "hook:forward": ("a forward hook doubling its float output",
                     "register_forward_hook(lambda mod, args, out: out * 2 if " + _FLOAT.format(v="out") + " else None)"),
    "hook:forward_pre": ("a forward pre-hook halving its first argument",
                         "register_forward_pre_hook(lambda mod, args: (args[0] * 0.5, *args[1:]) if args and "
                         + _FLOAT.format(v="args[0]") + " else None)"),
    "hook:forward_kwargs": ("a forward hook with_kwargs=True, always_call=True, adding one to its float output",
                            "register_forward_hook(lambda mod, args, kwargs, out: out + 1 if " + _FLOAT.format(v="out")
                            + " else None, with_kwargs=True, always_call=True)"),
    "hook:backward_pre": ("a full backward pre-hook doubling the gradient it gets",
                          "register_full_backward_pre_hook(lambda mod, go: tuple(None if g is None else g * 2 "
                          "for g in go))"),
}
# Dynamo breaks the graph at these ("Module-level backwards hooks require compiled autograd"): refused in fullgraph.
FULLGRAPH_REFUSES = ("hook:backward_pre",)
# What a module's hooks are kept in (torch/nn/modules/module.py): all emptied to remove every hook.
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
              "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
# The setting under which Dynamo guards on module hooks (generators.settings, the "guard" family): torch
# documents that without it a hook added or removed after a compile is not noticed (skip_nnmodule_hook_guards).
HOOKS_GUARDED = ("dynamo.skip_nnmodule_hook_guards", False)


def _hooks(program: Program) -> list[Variant]:
    """Module hooks added to a block instance (the layer's last, and its first module child: a sub-block,
    inside a region body where the layer is one), or every hook of the model removed (programs whose
    autograd features register module hooks), where the program is compiled with Dynamo guarding on them."""
    if HOOKS_GUARDED not in patches(program.options.settings):
        return []
    out = []
    for expr, _ in module_targets(program):
        for kind, (what, register) in HOOK_ADDS.items():
            if kind in FULLGRAPH_REFUSES and program.options.fullgraph:
                continue
            out.append(Variant(kind, expr, f"{what} registered on {expr}", (f"_hook = {expr}.{register}",),
                               ("_hook.remove()",)))
    for name, spec in program.block.weights[:1]:  # a tensor hook on a parameter: run by its AccumulateGrad node
        if spec.requires_grad and spec.dtype in FLOATS:
            p = f"{_owner(program)}.{name}"
            out.append(Variant("hook:param_grad", p, f"a hook doubling the gradient of {p}",
                               (f"_hook = {p}.register_hook(lambda g: g * 2)",), ("_hook.remove()",)))
    if any(a.startswith("module.") for a in program.options.autograd):
        out.append(Variant("hook:remove", "model", "every module hook of the model removed",
                           ("_saved = [(_m, _d, dict(getattr(_m, _d))) for _m in model.modules() "
                            f"for _d in {HOOK_DICTS!r} if getattr(_m, _d)]",
                            "for _m, _d, _v in _saved: getattr(_m, _d).clear()"),
                           ("for _m, _d, _v in _saved: getattr(_m, _d).update(_v)",)))
    return out


def _params_and_buffers(program: Program) -> list[Variant]:
    """Params and buffers: replaced by new objects, mutated in place, frozen."""
    owner = _owner(program)
    neutral = not sizes_follow_values(program)  # new values keep sizes unless some size follows the values
    out = []
    for name, spec in program.block.weights[:1]:
        p = f"{owner}.{name}"
        fresh = f"torch.randn({spec.shape!r}) * 0.5"
        # a frozen parameter's replacement is frozen too: requires_grad is a change of its own
        out.append(Variant("param:replace", p, f"{p} replaced by a new Parameter",
                           ("_saved = " + p, f"{p} = nn.Parameter({fresh}, requires_grad=_saved.requires_grad)"),
                           (f"{p} = _saved",), neutral))
        out.append(Variant("param:mutate", p, f"{p} scaled in place",
                           (f"_saved = {p}.detach().clone()", f"with torch.no_grad(): {p}.mul_(-0.5)"),
                           (f"with torch.no_grad(): {p}.copy_(_saved)",), neutral))
        frozen = any(c.frozen for s in program.sections for c in s.calls)
        if not frozen:
            out.append(Variant("param:requires_grad", p, f"{p}.requires_grad_(False)",
                               (f"{p}.requires_grad_(False)",), (f"{p}.requires_grad_(True)",)))
    for name, spec in program.block.buffers[:1]:
        r = f"{owner}.{name}"
        out.append(Variant("buffer:replace", r, f"{r} replaced by a new tensor",
                           ("_saved = " + r, f"{r} = torch.rand({spec.shape!r}) + 0.5"), (f"{r} = _saved",), True))
        out.append(Variant("buffer:mutate", r, f"{r} changed in place",
                           (f"_saved = {r}.detach().clone()", f"{r}.add_(1.0)"), (f"{r}.copy_(_saved)",), True))
    return out


def _written(program: Program) -> set[str]:
    """Program inputs written in place: by the block, or between repeats."""
    b = program.block
    return mutation_rules(b, dict(program.inputs)) | {s.write[0] for s in program.sections if s.write}


def _view_of(spec: TensorSpec, shape: tuple[int, ...]) -> Optional[str]:
    """An indexing of a tensor of ``spec`` that views it with ``shape``
    (its trailing dims narrowed, leading ones indexed at 0), if one does."""
    lead = len(spec.shape) - len(shape)
    if not shape or lead < 0 or any(d > e for d, e in zip(shape, spec.shape[lead:])):
        return None
    return "[" + ", ".join(["0"] * lead + [f":{d}" for d in shape]) + "]"


def _input_aliases(program: Program) -> list[Variant]:
    """Program input ``i`` (the first that can) made the same tensor as
    input 0 ("input:alias:make"), or a view of it ("input:alias:view"):
    offered when the program type-checks with input ``i`` of input 0's
    type (of the view's), writes neither in place, and input 0 needs no
    gradient (see below). Fresh inputs are made
    for every call, so nothing needs undoing."""
    x_name, x = program.inputs[0]
    if x.requires_grad:  # the float64 referee gets inputs copied one by one: an alias of a leaf with grad would
        return []        # reach it as two leaves, and its gradients would differ from eager's
    written = _written(program)
    out: dict[str, Variant] = {}
    for i, (name, spec) in enumerate(program.inputs[1:], 1):
        if name in written or x_name in written:
            continue

        def rebuild(new: TensorSpec, i=i) -> Program:
            return replace(program, inputs=tuple((n, new if j == i else s) for j, (n, s) in enumerate(program.inputs)))

        if "input:alias:make" not in out and valid(rebuild(x)):
            out["input:alias:make"] = Variant("input:alias:make", name, f"{name} is {x_name} (the same tensor)",
                                              (f"inputs[{i}] = inputs[0]",))
        index = _view_of(x, spec.shape)
        if "input:alias:view" not in out and index is not None and x.layout != "expanded":
            # a view of the same shape is as contiguous as input 0; a narrowed one is not
            layout = x.layout if spec.shape == x.shape else "strided"
            if valid(rebuild(replace(x, shape=spec.shape, layout=layout))):
                out["input:alias:view"] = Variant("input:alias:view", name,
                                                  f"{name} is a view of {x_name}: {x_name}{index}",
                                                  (f"inputs[{i}] = inputs[0]{index}",))
    return list(out.values())


# Global state: (kind, the Context field it corresponds to, its value, apply,
# undo, the floating dtype it brings in).
GLOBAL_STATE = (
    ("state:grad", "grad", False, ("torch.set_grad_enabled(False)",), ("torch.set_grad_enabled(True)",), ""),
    ("state:default_dtype", "default_dtype", "float64", ("torch.set_default_dtype(torch.float64)",),
     ("torch.set_default_dtype(torch.float32)",), "float64"),
    ("state:autocast", "autocast", True,
     ("_ctx = torch.autocast('cpu', dtype=torch.bfloat16)", "_ctx.__enter__()"), ("_ctx.__exit__(None, None, None)",),
     "bfloat16"),
    ("state:inference", "inference", True, ("_ctx = torch.inference_mode()", "_ctx.__enter__()"),
     ("_ctx.__exit__(None, None, None)",), ""),
)


def _under(program: Program, field: str, value) -> Program:
    """The program as if every repeat that leaves ``field`` alone ran under ``value``."""
    sections = []
    for s in program.sections:
        calls = tuple(c if getattr(c.context, field) is not None or (field == "inference" and c.context.grad is not None)
                      else replace(c, context=replace(c.context, **{field: value})) for c in s.calls)
        sections.append(replace(s, calls=calls))
    return replace(program, sections=tuple(sections))


def _global_state(program: Program) -> list[Variant]:
    out = []
    for kind, field, value, apply, undo, dtype in GLOBAL_STATE:
        if valid(_under(program, field, value)):
            out.append(Variant(kind, field, f"whole call under {field}={value}", apply, undo, dtype=dtype))
    return out


# The builders, in the order their changes run: cheap and neutral first.
CATALOGUE: dict[str, Callable[[Program], list[Variant]]] = {
    "repeat": _repeat,
    "input:values": _input_values,
    "params_and_buffers": _params_and_buffers,
    "module_attrs": _module_attrs,
    "frees": _frees,
    "attrs": _attrs,
    "closure_args": _closure_args,
    "packs": _packs,
    "closure_remake": _closure_remake,
    "modules": _modules,
    "global_state": _global_state,
    "input_aliases": _input_aliases,
    "input_meta": _input_meta,
    "hooks": _hooks,
}
LAST = ("input:shape", "input:rank")  # may leave a dynamic entry that serves every later call


def variants(program: Program) -> list[Variant]:
    """Every change the program supports, in the order to run them."""
    out = [v for build in CATALOGUE.values() for v in build(program)]
    return [v for v in out if v.kind not in LAST] + [v for v in out if v.kind in LAST]


# Families of non-neutral changes, the program's own first: a module hook added
# or removed (only in programs compiled with Dynamo guarding on hooks), a float crossing
# the edges of == (a signed zero, NaN) in any home, then its free values,
# attributes and objects, what is made of its functions and modules.
FAMILIES = ("hook", "edge", "free", "attr", "object", "closure", "module", "param", "buffer", "state", "input")
# The order is a priority: with the default three changes a program gets a neutral one and the first two
# families it has, so ``input`` (in every program) is changed in about one program in ten. Drawing the
# order of the common families per program (input in 54 of 84 programs of a make-fuzz sample, not 8) cost
# 6% more per program (a changed input always recompiles) and pushed three edge faults found near the end
# of a 120-s campaign past it; the guard oracle's ``unguarded`` check finds a dropped dtype guard without it.


def family(kind: str) -> str:
    """The family of a kind: "edge" for a change to the other signed zero or
    to NaN, else the kind's first part."""
    return "edge" if kind.rsplit(":", 1)[-1] in EDGES else kind.split(":")[0]


def change_key(variant: Variant | dict) -> str:
    """A change by what it is and what it changes (kind and target), the same in a program that triage
    has taken a part away from (its values and lines may read otherwise there)."""
    d = variant.to_dict() if isinstance(variant, Variant) else variant
    return f"{d['kind']}|{d['target']}"


def select(program: Program, limit: int) -> list[Variant]:
    """At most ``limit`` variants (``limit`` < 0: all): one neutral change,
    then one change per family in FAMILIES order, round after round, each
    family's changes shuffled with the program's seed."""
    found = variants(program)
    if limit < 0 or len(found) <= limit:
        return found
    rng = random.Random(program.seed)
    neutral = [v for v in found if v.neutral]
    rng.shuffle(neutral)
    families: dict[str, list[Variant]] = {f: [] for f in FAMILIES}
    for v in found:
        if not v.neutral:
            families.setdefault(family(v.kind), []).append(v)
    for members in families.values():
        rng.shuffle(members)
    chosen = neutral[:1]
    while len(chosen) < limit and any(families.values()):
        for members in families.values():
            if members and len(chosen) < limit:
                chosen.append(members.pop(0))
    chosen += neutral[1:1 + limit - len(chosen)]
    order = {id(v): i for i, v in enumerate(found)}
    return sorted(chosen, key=lambda v: order[id(v)])


def grown_batch(program: Program) -> Optional[Program]:
    """``program`` with its batch grown by one (dimension 0 of every input
    that shares the first input's, when that is at least 2: a size of 0 or 1
    is specialized by design), if the same model takes it; else None. What
    a door that resizes calls second (generators.doors), where a symbolic
    graph must serve."""
    first = program.inputs[0][1].shape
    if not first or first[0] < 2:
        return None
    batch = first[0]
    inputs = tuple((n, replace(s, shape=(batch + 1, *s.shape[1:])) if s.shape and s.shape[0] == batch
                    and len(s.shape) == len(first) else s) for n, s in program.inputs)
    grown = replace(program, inputs=inputs)
    return grown if valid(grown) else None
