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
so it must not force a recompile; any other change may only reuse a cached
graph if the guards prove it still right.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Callable, Optional

from .check import check
from .codegen import SETTINGS, free_read, global_name, input_expr, instance_attr, literal
from .ir import FLOATS, LAYOUTS, Arg, Free, MalformedProgram, Program, TensorSpec, Value, typed_key
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


def _free_target(program: Program, name: str) -> str:
    home = next(f.home for f in program.frees if f.name == name)
    module = program.block.kind == "module"
    return {
        "global": global_name(name),
        "closure": f"cell({'Block.forward' if module else 'block'}, {name!r}).cell_contents",
        "class_attr": f"{'Block' if module else SETTINGS}.{name}",
        "argument": f"kwargs[{name!r}]",
        "dataclass": free_read(program, name),
        "namespace": free_read(program, name),
    }[home]


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


def _alternatives(program: Program, operand, old: Value, rebuild: Callable[[Value], Program]) -> dict[str, Value]:
    """A new value of the same type ("") and of another type ("type"), each
    one the program still type-checks with."""
    out: dict[str, Value] = {}
    for v in _slot_choices(program, operand):
        if typed_key(v) == typed_key(old):
            continue
        qualifier = "" if type(v) is type(old) else "type"
        if qualifier not in out and valid(rebuild(v)):
            out[qualifier] = v
    return out


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
    return [Variant("input:values", name, f"{name}: new values", tuple(_make_input(program, 0, spec)), (), True)]


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


def _frees(program: Program) -> list[Variant]:
    out = []
    for f in program.frees:
        def rebuild(v: Value, f=f) -> Program:
            return replace(program, frees=tuple(replace(g, value=v) if g is f else g for g in program.frees))

        target = _free_target(program, f.name)
        for qualifier, new in _alternatives(program, Free(f.name), f.value, rebuild).items():
            kind = ":".join(p for p in ("free", f.home, qualifier) if p)
            if f.home == "argument":
                out.append(Variant(kind, target, f"argument {f.name}: {literal(f.value)} -> {literal(new)}",
                                   (f"{target} = {literal(new)}",), ("kwargs.clear()",)))
            else:
                out.append(_assign(kind, target, f.value, new))
            if f.home == "class_attr" and program.block.kind == "module" and not qualifier:
                inst = instances(program)[-1]
                out.append(Variant("free:class_attr:shadow", f"{inst}.{f.name}",
                                   f"{inst}.{f.name} = {literal(new)} shadows Block.{f.name} = {literal(f.value)}",
                                   (f"{inst}.{f.name} = {literal(new)}",), (f"del {inst}.{f.name}",)))
    return out


def _attrs(program: Program) -> list[Variant]:
    """Python arguments held as module-instance attributes: change one instance's."""
    b = program.block
    if not b.attrs or not b.args:
        return []
    out = []
    calls = [(k, i) for k, s in enumerate(program.sections) for i in range(len(s.calls))]
    k, i = calls[-1]
    inst = instances(program)[-1]
    call = program.sections[k].calls[i]
    for j, name in enumerate(b.args):
        def rebuild(v: Value, j=j) -> Program:
            args = tuple(v if n == j else a for n, a in enumerate(call.args))
            s = program.sections[k]
            new_calls = tuple(replace(c, args=args) if n == i else c for n, c in enumerate(s.calls))
            return replace(program, sections=tuple(replace(s, calls=new_calls) if m == k else t
                                                   for m, t in enumerate(program.sections)))

        for qualifier, new in _alternatives(program, Arg(name), call.args[j], rebuild).items():
            kind = ":".join(p for p in ("attr:instance", qualifier) if p)
            out.append(_assign(kind, f"{inst}.{name}", call.args[j], new))
            if not qualifier:
                target = f"{inst}.__dict__[{name!r}]"
                out.append(_assign("attr:instance:dict", target, call.args[j], new))
        break  # one argument is enough: each is guarded the same way
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


def _params_and_buffers(program: Program) -> list[Variant]:
    """Params and buffers: replaced by new objects, mutated in place, frozen."""
    owner = _owner(program)
    out = []
    for name, spec in program.block.weights[:1]:
        p = f"{owner}.{name}"
        fresh = f"torch.randn({spec.shape!r}) * 0.5"
        out.append(Variant("param:replace", p, f"{p} replaced by a new Parameter",
                           ("_saved = " + p, f"{p} = nn.Parameter({fresh})"), (f"{p} = _saved",), True))
        out.append(Variant("param:mutate", p, f"{p} scaled in place",
                           (f"_saved = {p}.detach().clone()", f"with torch.no_grad(): {p}.mul_(-0.5)"),
                           (f"with torch.no_grad(): {p}.copy_(_saved)",), True))
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
    "global_state": _global_state,
    "input_meta": _input_meta,
}
LAST = ("input:shape", "input:rank")  # may leave a dynamic entry that serves every later call


def variants(program: Program) -> list[Variant]:
    """Every change the program supports, in the order to run them."""
    out = [v for build in CATALOGUE.values() for v in build(program)]
    return [v for v in out if v.kind not in LAST] + [v for v in out if v.kind in LAST]


# Families of non-neutral changes, the program's own first: its free values
# and attributes are what a drawn program has that others do not.
FAMILIES = ("free", "attr", "param", "buffer", "state", "input")


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
            families.setdefault(v.kind.split(":")[0], []).append(v)
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
