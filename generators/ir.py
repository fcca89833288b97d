"""Program IR: a generated program as a plain, JSON-round-trippable value.

A program defines one *layer block* (a helper function or an ``nn.Module``
subclass) and runs it in one or more *sections*, each a repetition structure (a loop, a
nested loop, a ``while`` loop, or separate calls) whose repeats are described by
``Call`` rows: the Python arguments, the tensor, the ambient state (grad mode,
autocast, inference mode, default dtype) and the module instance of that
repeat. The rows alone say which repeats compute the same function: that is the
ground truth that oracles check the deduplication pass against.

Below the layer sits a hierarchy of *sub-blocks* (``Program.subs``): named
helpers and modules that a block body calls with a ``block`` statement
(``Stmt(out, "block", (Ref(x), Const(name), Const(slot)))``), up to
``MAX_DEPTH`` levels, a child possibly shared by two parents, each level
maybe marked ``nested_compile_region``. Sub-blocks take one tensor and no
Python arguments, so which of their calls compute the same function follows
from the layer repeat they run in (``Program.block_calls``). Nothing here
imports torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Optional, Union

from .forms import FORMS
from .inputs import EXTRAS, TAKES  # noqa: F401 (EXTRAS: the IR's own name too)
from .values import FLOATS, NAN, DType, Fn, PyList, PySlice, Shape, Sub, Value, typed_key, SUBCLASSES  # noqa: F401 (the IR's own names too)

STRUCTURES = ("calls", "for_values", "for_tuple", "for_range", "module_list", "while", "nested")
FLOWS = ("chain", "residual", "fanout")
BLOCK_KINDS = ("function", "module")
OUTPUT_STYLES = ("single", "tuple", "dict")
DTYPES = ("float32", "float64", "bfloat16", "float16", "int64", "bool")
LAYOUTS = ("contiguous", "transposed", "strided", "expanded")
# Call-site views of a per-repeat tensor: how the argument expression is written.
VIEWS = ("none", "transpose", "narrow", "contiguous")
# Where a free value lives (see FreeVar): what a guard must watch to see it change.
HOMES = ("global", "closure", "class_attr", "argument", "dataclass", "namespace", "dict")
# Homes a forward can rebind inside one call, between two repeats (Call.sets).
SETTABLE = ("global", "dataclass", "namespace", "class_attr", "dict")
# How a block receives its extra tensor inputs (EXTRAS): generators.inputs.PACKS.
# How a block receives its Python arguments: one by one, or as fields of one user object.
PACKS = ("", "dataclass", "module")
# What a repeat passes as the block's first extra input (Call.alias): its own
# program input, the primary tensor itself, or a view of the primary.
ALIASES = ("", "same", "view")
# In-place writes a forward makes to a program input after each repeat (Section.write).
WRITES = ("direct", "view")
# How a module block holds the instances of its module children.
HOLDERS = ("attr", "module_list", "module_dict", "sequential")
# How a nested_compile_region body is reused (Block.reuse): by Dynamo's guards, or by a key the program computes
# (``reuse_hash_fn``: generators.codegen.REUSE_KEY; the key must be a constant, so never with symbolic shapes).
REUSES = ("", "hash")
CHILD = "block"  # the op of a statement that calls a sub-block
MAX_DEPTH = 3  # the layer block is level 1


class MalformedProgram(ValueError):
    """The IR breaks one of its own invariants (a generator bug or a bad file)."""


# --- tensors, operands, statements --------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    shape: Shape
    dtype: str = "float32"
    requires_grad: bool = False
    layout: str = "contiguous"  # how make_inputs builds it: see LAYOUTS
    data: Optional[tuple] = None  # its values, flattened (an OpInfo sample's: generators.opinfo); None: random


@dataclass(frozen=True)
class Ref:
    """A tensor already in scope: a block input, weight, buffer or earlier value."""

    name: str


@dataclass(frozen=True, eq=False)
class Const:
    """A literal written into the block's source, the same in every repeat.
    Equal to another only for a value that computes the same (``typed_key``):
    ``3`` and ``3.0`` are two programs, and the checker's caches, keyed on
    programs, must not take one for the other."""

    value: Value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Const) and typed_key(self.value) == typed_key(other.value)

    def __hash__(self) -> int:
        return hash(("Const", typed_key(self.value)))


@dataclass(frozen=True)
class Arg:
    """A block parameter whose value each repeat chooses (``Call.args``)."""

    name: str


@dataclass(frozen=True)
class Free:
    """A Python value the block reads at run time from a binding that can be
    changed between calls (``Program.frees``): what guards must cover."""

    name: str


Operand = Union[Ref, Const, Arg, Free]


@dataclass(frozen=True)
class FreeVar:
    """A named Python value and where it lives (one of HOMES): a module
    global, a closure cell of the block, a class attribute, an argument of
    the compiled ``forward`` (with this value as its default), a field of a
    module-global dataclass or namespace object, or an item of a module-global
    dict read by its key (``OPTS['p0']``)."""

    name: str
    value: Value
    home: str
    # the dict home read with a default, ``OPTS.get('p0', default)`` (one value; empty: read by key): the key
    # taken out of the dict between calls is then a change the program computes with (a DICT_CONTAINS guard's)
    default: tuple = ()


@dataclass(frozen=True)
class Stmt:
    out: str
    op: str
    operands: tuple[Operand, ...]
    spelling: str = ""  # how the op is written: "" its own fmt, else a kind of generators.spellings


@dataclass(frozen=True)
class Block:
    kind: str  # one of BLOCK_KINDS
    inputs: tuple[str, ...]  # tensor parameters: the primary, then program inputs it also reads
    weights: tuple[tuple[str, TensorSpec], ...]  # nn.Parameters
    buffers: tuple[tuple[str, TensorSpec], ...]  # registered buffers (batch-norm statistics)
    args: tuple[str, ...]  # Python parameters, valued per repeat
    body: tuple[Stmt, ...]
    result: str
    compile_region: bool = False  # decorated with torch.compiler.nested_compile_region
    attrs: bool = False  # module blocks: Python arguments are constructor attributes
    name: str = ""  # "" for the layer block; a sub-block's name (Program.subs)
    holder: str = "attr"  # module blocks: how module children are held (HOLDERS)
    extras: str = "positional"  # how extra tensor inputs are passed (EXTRAS)
    pack: str = ""  # how Python arguments are passed (PACKS)
    returns: str = "single"  # what it returns beside its result (generators.returns)
    takes: str = ""  # one more argument, ``given``, beside its tensors (generators.inputs.TAKES)
    # how a nested_compile_region body is reused (REUSES): "" by Dynamo's guards on each call's inputs;
    # "hash" by a reuse_hash_fn that keys each call by what its arguments carry
    reuse: str = ""

    def children(self) -> list[tuple[str, int]]:
        """(sub-block, instance slot) of each child call, in body order."""
        return [(s.operands[1].value, s.operands[2].value) for s in self.body if s.op == CHILD]

    def instances(self) -> list[tuple[str, int]]:
        """Distinct (sub-block, slot) pairs: one child instance each, in order of first use."""
        return list(dict.fromkeys(self.children()))


def called(layer: Block, subs) -> tuple[Block, ...]:
    """The sub-blocks of ``subs`` the layer calls, directly or through one
    another, in their order (names no sub-block has are left for the check
    to reject)."""
    by_name = {sb.name: sb for sb in subs}
    seen: set[str] = set()
    todo = [n for n, _ in layer.children()]
    while todo:
        name = todo.pop()
        if name not in seen and name in by_name:
            seen.add(name)
            todo += [n for n, _ in by_name[name].children()]
    return tuple(sb for sb in subs if sb.name in seen)


@dataclass(frozen=True)
class BlockCall:
    """One call of a block as the program runs it: the layer's repeats and
    every sub-block call inside them."""

    block: str  # "" for the layer
    path: tuple[tuple[str, int], ...]  # (block, statement index) of each enclosing call site
    repeat: int  # the layer repeat it runs in (execution order)
    key: tuple  # equal keys: the same function of the same kind of inputs


# --- repeats ------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """Global state a repeat runs under; ``None`` leaves it as it is."""

    grad: Optional[bool] = None  # torch.set_grad_enabled
    autocast: Optional[bool] = None  # torch.autocast("cpu", dtype=torch.bfloat16, enabled=...)
    inference: Optional[bool] = None  # torch.inference_mode
    default_dtype: Optional[str] = None  # torch.set_default_dtype


@dataclass(frozen=True, eq=False)
class Call:
    """One repeat of the block within a section."""

    args: tuple[Value, ...] = ()  # aligned with Block.args
    tensor: Optional[str] = None  # fanout: the program input this repeat reads (None: h)
    view: str = "none"  # how ``tensor`` is passed, see VIEWS
    context: Context = Context()
    frozen: bool = False  # this module instance's parameters have requires_grad=False
    sets: tuple[tuple[str, Value], ...] = ()  # free values the forward rebinds just before this repeat
    alias: str = ""  # what is passed as the block's first extra input (ALIASES)
    how: str = ""  # the call-site form this repeat is written in (generators.forms.FORMS; "" plain)
    given: str = ""  # the variant of the block's taken argument it passes (generators.inputs.TAKES)

    def _typed(self) -> tuple:
        # values by what they compute, as Const: an argument 3 and 3.0 are two programs
        return (tuple(typed_key(v) for v in self.args), self.tensor, self.view, self.context, self.frozen,
                tuple((n, typed_key(v)) for n, v in self.sets), self.alias, self.how, self.given)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Call) and self._typed() == other._typed()

    def __hash__(self) -> int:
        return hash(self._typed())


@dataclass(frozen=True)
class Section:
    structure: str  # one of STRUCTURES
    flow: str  # chain: h = f(h); residual: h = h + f(h); fanout: outs.append(f(t))
    calls: tuple[Call, ...]
    outer: int = 1  # "nested": the outer loop's trip count; the inner loop runs ``calls``
    interleave: Optional[str] = None  # an interlude run after every call (INTERLUDES)
    keywords: bool = False  # Python arguments passed by keyword
    write: Optional[tuple[str, str]] = None  # (program input, WRITES mode) written in place after every call
    # the calls' one context entered once around the section (``with torch.autocast(...): for ...``), as training
    # loops do: no bracket exits and enters between calls, and what a bracket keeps (autocast's cast cache) lasts
    bracket: bool = False

    @property
    def count(self) -> int:
        return self.outer * len(self.calls)

    def repeats(self) -> list[Call]:
        return [c for _ in range(self.outer) for c in self.calls]


@dataclass(frozen=True)
class Options:
    fullgraph: bool = False
    dynamic: Optional[bool] = None  # torch.compile(dynamic=...)
    mark_dynamic: tuple[tuple[str, int, bool], ...] = ()  # (input, dim, strict)
    door: str = ""  # how the program is reached (generators.doors; "": torch.compile(model)(inputs))
    settings: tuple[str, ...] = ()  # torch config it is compiled under (generators.settings)
    autograd: tuple[str, ...] = ()  # hooks, saved tensors and gradient drives it uses (generators.autograd)


@dataclass(frozen=True)
class Program:
    inputs: tuple[tuple[str, TensorSpec], ...]  # first is the carried input x
    block: Block
    sections: tuple[Section, ...]
    interludes: tuple[Optional[str], ...] = ()  # code before each section after the first
    outputs: str = "single"  # one of OUTPUT_STYLES
    options: Options = Options()
    seed: int = 0
    frees: tuple[FreeVar, ...] = ()
    subs: tuple[Block, ...] = ()  # sub-blocks, called from block bodies (see CHILD)
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def block_named(self, name: str) -> Block:
        """The layer for ``""``, else the sub-block of that name."""
        return self.block if name == "" else self.sub(name)

    def sub(self, name: str) -> Block:
        for b in self.subs:
            if b.name == name:
                return b
        raise MalformedProgram(f"no sub-block named {name!r}")

    def blocks(self) -> list[Block]:
        """The layer block, then its sub-blocks."""
        return [self.block, *self.subs]

    def depth(self) -> int:
        """Levels of the block hierarchy: 1 for a flat program."""

        def level(b: Block, seen: tuple[str, ...]) -> int:
            below = 0
            for name, _ in dict.fromkeys(b.children()):
                if name in seen:
                    raise MalformedProgram(f"sub-block {name!r} calls itself through {' -> '.join(seen)}")
                below = max(below, level(self.sub(name), (*seen, name)))
            return 1 + below

        return level(self.block, ("",))

    def block_calls(self) -> list[BlockCall]:
        """Every call of every block, in execution order, with its ground truth:
        a sub-block's calls inside identical layer repeats compute the same
        function, and so do its calls in repeats that differ only in what the
        sub-block never sees (the layer's Python arguments, another call site)."""
        out: list[BlockCall] = []

        def visit(b: Block, path: tuple, repeat: int, key: tuple) -> None:
            for k, stmt in enumerate(b.body):
                if stmt.op == CHILD:
                    name = stmt.operands[1].value
                    # a value its caller reads from an intermediate's metadata may differ by call site and repeat
                    takes = self.sub(name).takes
                    own = ((*path, (b.name, k)), repeat) if takes in TAKES and TAKES[takes].carried else ()
                    out.append(BlockCall(name, (*path, (b.name, k)), repeat, (name, *key, *own)))
                    visit(self.sub(name), (*path, (b.name, k)), repeat, key)

        for i, full in enumerate(self.repeat_keys()):
            out.append(BlockCall("", (), i, ("", *full)))
            visit(self.block, (), i, full[1:])  # a sub-block sees no layer arguments
        return out

    def identical_calls(self) -> dict[str, list[list[int]]]:
        """Per block name, groups of indices into ``block_calls()`` that are
        semantically identical (the layer's groups are ``identical_repeats``)."""
        groups: dict[str, dict[tuple, list[int]]] = {}
        for i, c in enumerate(self.block_calls()):
            groups.setdefault(c.block, {}).setdefault(c.key, []).append(i)
        return {name: list(g.values()) for name, g in groups.items()}

    # -- ground truth ----------------------------------------------------------

    def repeats(self) -> list[tuple[int, Call]]:
        """Every repeat in execution order, as (section index, call)."""
        return [(i, c) for i, s in enumerate(self.sections) for c in s.repeats()]

    def repeat_key(self, call: Call) -> tuple:
        """Two repeats with equal keys compute the same function of their inputs."""
        spec = dict(self.inputs).get(call.tensor) if call.tensor else None
        tensor = None if spec is None else (spec.shape, spec.dtype, spec.requires_grad, spec.layout)
        ambient = tuple(ambient_state(call.context).values())
        sets = tuple((n, typed_key(v)) for n, v in sorted(call.sets))
        how = call.how if call.how in FORMS and not FORMS[call.how].same else ""
        given = TAKES[self.block.takes].computes(call.given) if self.block.takes in TAKES else call.given
        return (tuple(typed_key(v) for v in call.args), tensor, call.view, ambient, call.frozen, sets, call.alias,
                how, given)

    def repeat_keys(self) -> list[tuple]:
        """Every repeat's ``repeat_key`` in execution order, and whether the
        value it is given was carried through an earlier call that made it a
        Tensor subclass (a chain or residual carries the subclass on: the
        later repeats are given another type than the first)."""
        keys, carried = [], False
        # a value read from the carried tensor's metadata (requires_grad, contiguity) may change along a chain
        moves = self.block.takes in TAKES and TAKES[self.block.takes].carried
        for i, (k, call) in enumerate(self.repeats()):
            position = i if moves and self.sections[k].flow != "fanout" else None
            keys.append((*self.repeat_key(call), carried, position))
            made = call.how in FORMS and FORMS[call.how].carries
            carried = carried or (made and self.sections[k].flow != "fanout")
        return keys

    def identical_repeats(self) -> list[list[int]]:
        """Groups of repeat indices (execution order) that are semantically identical."""
        groups: dict[tuple, list[int]] = {}
        for i, key in enumerate(self.repeat_keys()):
            groups.setdefault(key, []).append(i)
        return list(groups.values())

    def variations(self) -> dict[str, list[str]]:
        """What differs between repeats, by kind: ``{"arg:float": ["s0"], ...}``.

        Kinds: ``arg:<type>`` (a Python argument), ``set:<home>:<type>`` (a
        free value the forward rebinds between repeats), ``tensor:<attribute>``
        (shape, dtype, requires_grad, layout, view), ``alias`` (an extra input
        that is, or views, the primary in some repeats), ``context:<field>``
        ``frozen`` and ``how:<form>`` (a repeat written in a call-site form of
        ``generators.forms``). Types name edge floats apart (``float(-0.0)``,
        ``float(nan)``, see ``value_kind``).
        """
        calls = [c for _, c in self.repeats()]
        out: dict[str, list[str]] = {}

        def differs(values: list) -> bool:
            return len({repr(typed_key(v)) for v in values}) > 1

        for j, name in enumerate(self.block.args):
            values = [c.args[j] for c in calls]
            if differs(values):
                kinds = sorted({value_kind(v) for v in values})
                out.setdefault(f"arg:{'/'.join(kinds)}", []).append(name)
        specs = [dict(self.inputs).get(c.tensor) if c.tensor else None for c in calls]
        if any(s is not None for s in specs):
            for attr in ("shape", "dtype", "requires_grad", "layout"):
                if differs([getattr(s, attr, None) for s in specs]):
                    out.setdefault(f"tensor:{attr}", []).append(attr)
        if differs([c.view for c in calls]):
            out["tensor:view"] = ["view"]
        for f in fields(Context):
            if differs([ambient_state(c.context)[f.name] for c in calls]):
                out[f"context:{f.name}"] = [f.name]
        if differs([c.frozen for c in calls]):
            out["frozen"] = ["frozen"]
        homes = {f.name: f.home for f in self.frees}
        for name in sorted({n for c in calls for n, _ in c.sets}):
            values = [dict(c.sets).get(name) for c in calls]
            if differs(values):
                kinds = sorted({value_kind(v) for v in values if v is not None})
                out.setdefault(f"set:{homes.get(name, '?')}:{'/'.join(kinds)}", []).append(name)
        if differs([c.alias for c in calls]):
            out["alias"] = sorted({c.alias or "own" for c in calls})
        if differs([c.given for c in calls]):
            out[f"given:{self.block.takes}"] = sorted({c.given for c in calls})
        for how in dict.fromkeys(c.how for c in calls if c.how):
            out[f"how:{how}"] = [how]
        return out

    def to_json(self) -> str:
        return json.dumps(to_dict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Program:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise MalformedProgram(f"not JSON: {e}") from e
        return from_dict(data)


def with_call(program: Program, k: int, i: int, call: Call) -> Program:
    """``program`` with call ``i`` of section ``k`` replaced (unchecked)."""
    from dataclasses import replace

    s = program.sections[k]
    section = replace(s, calls=s.calls[:i] + (call,) + s.calls[i + 1:])
    return replace(program, sections=program.sections[:k] + (section,) + program.sections[k + 1:])


def with_block(program: Program, block: Block) -> Program:
    """``program`` with the block named like ``block`` (the layer for "") replaced by it (unchecked)."""
    from dataclasses import replace

    if not block.name:
        return replace(program, block=block)
    return replace(program, subs=tuple(block if sb.name == block.name else sb for sb in program.subs))


def respelled(program: Program, block: str, i: int, spelling: str) -> Program:
    """``program`` with statement ``i`` of block ``block`` ("" the layer)
    written in ``spelling`` ("" its op's default; unchecked)."""
    from dataclasses import replace

    b = program.block_named(block)
    return with_block(program, replace(b, body=b.body[:i] + (replace(b.body[i], spelling=spelling),) + b.body[i + 1:]))


def taking(program: Program, name: str, kind: str) -> Program:
    """``program`` with block ``name`` ("" the layer) taking ``kind`` ("" nothing; generators.inputs.TAKES),
    every layer repeat passing the first variant of it (unchecked)."""
    from dataclasses import replace

    program = with_block(program, replace(program.block_named(name), takes=kind))
    if name:
        return program
    given = TAKES[kind].variants[0][0] if kind else ""
    return replace(program, sections=tuple(replace(s, calls=tuple(replace(c, given=given) for c in s.calls))
                                           for s in program.sections))


def plain_inputs(program: Program) -> Program:
    """``program`` with every block taking nothing more and its extra tensors passed one by one (unchecked)."""
    from dataclasses import replace

    for b in program.blocks():
        program = taking(program, b.name, "")
    return replace(program, block=replace(program.block, extras="positional"))


def spelled(program: Program) -> list[tuple[str, int, Stmt]]:
    """(block, index, statement) of every statement written in a spelling
    other than its op's default, the layer's first."""
    return [(b.name, i, s) for b in program.blocks() for i, s in enumerate(b.body) if s.spelling]


def ambient_state(ctx: Context) -> dict[str, Any]:
    """The state a context leaves in force (``None`` fields keep the defaults
    a program starts from), so that ``enable_grad()`` equals no context."""
    return {
        "grad": True if ctx.grad is None else ctx.grad,
        "autocast": bool(ctx.autocast),
        "inference": bool(ctx.inference),
        "default_dtype": ctx.default_dtype or "float32",
    }


def edge_kind(v: Value) -> str:
    """The edge a number sits on ("" for an ordinary one): what a compiler
    that compares values with ``==`` or in 32 bits gets wrong."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return ""
    if isinstance(v, int):
        return "int64" if not -2**31 <= v < 2**31 else ""
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf"
    if v == 0.0:
        return "-0.0" if repr(v) == "-0.0" else ""
    if abs(v) < 1.2e-38:
        return "subnormal"
    if abs(v) > 1e18:
        return "huge"
    return ""


def value_kind(v: Value) -> str:
    if isinstance(v, PyList):
        return "list"
    if isinstance(v, PySlice):
        return "slice"
    if isinstance(v, DType):
        return "dtype"
    if isinstance(v, Fn):
        return "callable"
    if isinstance(v, Sub):
        return "subclass"
    edge = edge_kind(v)
    return f"{type(v).__name__}({edge})" if edge else type(v).__name__


# --- JSON encoding -------------------------------------------------------------
# JSON has no tuples, slices, dtypes or operand tags, so all are made explicit.


def enc_value(v: Value) -> Any:
    if isinstance(v, tuple):
        return {"tuple": [enc_value(x) for x in v]}
    if isinstance(v, PyList):
        return {"list": [enc_value(x) for x in v.items]}
    if isinstance(v, PySlice):
        return {"slice": [v.start, v.stop, v.step]}
    if isinstance(v, DType):
        return {"dtype": v.name}
    if isinstance(v, Fn):
        return {"fn": v.name}
    if isinstance(v, Sub):
        return {"sub": [v.cls, enc_value(v.value)]}
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return {"float": repr(v)}
    return v


def dec_value(v: Any) -> Value:
    if isinstance(v, dict):
        if len(v) != 1:
            raise MalformedProgram(f"unknown value encoding {v!r}")
        ((tag, x),) = v.items()
        if tag == "tuple":
            return tuple(dec_value(i) for i in x)
        if tag == "list":
            return PyList(tuple(dec_value(i) for i in x))
        if tag == "slice":
            return PySlice(*x)
        if tag == "dtype":
            return DType(x)
        if tag == "fn":
            return Fn(x)
        if tag == "sub":
            if not isinstance(x, list) or len(x) != 2 or x[0] not in SUBCLASSES:
                raise MalformedProgram(f"unknown subclass value {x!r}")
            return Sub(str(x[0]), dec_value(x[1]))
        if tag == "float":
            value = float(x)
            return NAN if value != value else value
        raise MalformedProgram(f"unknown value encoding {v!r}")
    if isinstance(v, list):
        raise MalformedProgram(f"bare JSON lists are not values: {v!r}")
    return v


def _enc_operand(o: Operand) -> dict:
    if isinstance(o, Ref):
        return {"ref": o.name}
    if isinstance(o, Arg):
        return {"arg": o.name}
    if isinstance(o, Free):
        return {"free": o.name}
    return {"const": enc_value(o.value)}


def _dec_operand(d: Any) -> Operand:
    if not isinstance(d, dict) or len(d) != 1:
        raise MalformedProgram(f"operand must be a one-key object, got {d!r}")
    ((tag, v),) = d.items()
    if tag == "ref":
        return Ref(v)
    if tag == "arg":
        return Arg(v)
    if tag == "free":
        return Free(v)
    if tag == "const":
        return Const(dec_value(v))
    raise MalformedProgram(f"unknown operand tag {tag!r}")


def _enc_spec(s: TensorSpec) -> dict:
    d = {"shape": list(s.shape), "dtype": s.dtype, "requires_grad": s.requires_grad, "layout": s.layout}
    if s.data is not None:
        d["data"] = [enc_value(v) for v in s.data]
    return d


def _dec_spec(d: dict) -> TensorSpec:
    data = d.get("data")
    return TensorSpec(tuple(d["shape"]), d["dtype"], bool(d["requires_grad"]), d.get("layout", "contiguous"),
                      None if data is None else tuple(dec_value(v) for v in data))


def _enc_named(pairs) -> list:
    return [[n, _enc_spec(s)] for n, s in pairs]


def _dec_named(items) -> tuple:
    return tuple((n, _dec_spec(s)) for n, s in items)


def _enc_call(c: Call) -> dict:
    d: dict[str, Any] = {"args": [enc_value(v) for v in c.args]}
    if c.tensor is not None:
        d["tensor"] = c.tensor
    if c.view != "none":
        d["view"] = c.view
    ctx = {f.name: getattr(c.context, f.name) for f in fields(Context) if getattr(c.context, f.name) is not None}
    if ctx:
        d["context"] = ctx
    if c.frozen:
        d["frozen"] = True
    if c.sets:
        d["sets"] = [[n, enc_value(v)] for n, v in c.sets]
    if c.alias:
        d["alias"] = c.alias
    if c.how:
        d["how"] = c.how
    if c.given:
        d["given"] = c.given
    return d


def _dec_call(d: dict) -> Call:
    return Call(
        args=tuple(dec_value(v) for v in d["args"]),
        tensor=d.get("tensor"),
        view=d.get("view", "none"),
        context=Context(**d.get("context", {})),
        frozen=bool(d.get("frozen", False)),
        sets=tuple((str(n), dec_value(v)) for n, v in d.get("sets", [])),
        alias=str(d.get("alias", "")),
        how=str(d.get("how", "")),
        given=str(d.get("given", "")),
    )


def _enc_stmt(s: Stmt) -> dict:
    d = {"out": s.out, "op": s.op, "operands": [_enc_operand(o) for o in s.operands]}
    if s.spelling:
        d["spelling"] = s.spelling
    return d


def _enc_block(b: Block) -> dict:
    d = {
        "kind": b.kind,
        "inputs": list(b.inputs),
        "weights": _enc_named(b.weights),
        "buffers": _enc_named(b.buffers),
        "args": list(b.args),
        "body": [_enc_stmt(s) for s in b.body],
        "result": b.result,
        "compile_region": b.compile_region,
        "attrs": b.attrs,
    }
    if b.name:
        d["name"] = b.name
    if b.holder != "attr":
        d["holder"] = b.holder
    if b.extras != "positional":
        d["extras"] = b.extras
    if b.pack:
        d["pack"] = b.pack
    if b.returns != "single":
        d["returns"] = b.returns
    if b.takes:
        d["takes"] = b.takes
    if b.reuse:
        d["reuse"] = b.reuse
    return d


def _dec_block(b: dict) -> Block:
    return Block(
        kind=b["kind"],
        inputs=tuple(b["inputs"]),
        weights=_dec_named(b["weights"]),
        buffers=_dec_named(b.get("buffers", [])),
        args=tuple(b["args"]),
        body=tuple(Stmt(s["out"], s["op"], tuple(_dec_operand(x) for x in s["operands"]), str(s.get("spelling", "")))
                   for s in b["body"]),
        result=b["result"],
        compile_region=bool(b.get("compile_region", False)),
        attrs=bool(b.get("attrs", False)),
        name=str(b.get("name", "")),
        holder=str(b.get("holder", "attr")),
        extras=str(b.get("extras", "positional")),
        pack=str(b.get("pack", "")),
        returns=str(b.get("returns", "single")),
        takes=str(b.get("takes", "")),
        reuse=str(b.get("reuse", "")),
    )


def to_dict(p: Program) -> dict:
    d = {
        "inputs": _enc_named(p.inputs),
        "block": _enc_block(p.block),
        "sections": [
            {
                "structure": s.structure,
                "flow": s.flow,
                "calls": [_enc_call(c) for c in s.calls],
                "outer": s.outer,
                "interleave": s.interleave,
                "keywords": s.keywords,
                **({"write": list(s.write)} if s.write else {}),
                **({"bracket": True} if s.bracket else {}),
            }
            for s in p.sections
        ],
        "interludes": list(p.interludes),
        "outputs": p.outputs,
        "options": {
            "fullgraph": p.options.fullgraph,
            "dynamic": p.options.dynamic,
            "mark_dynamic": [list(m) for m in p.options.mark_dynamic],
            **({"door": p.options.door} if p.options.door else {}),
            **({"settings": list(p.options.settings)} if p.options.settings else {}),
            **({"autograd": list(p.options.autograd)} if p.options.autograd else {}),
        },
        "seed": p.seed,
        "frees": [[f.name, enc_value(f.value), f.home, *(enc_value(d) for d in f.default)] for f in p.frees],
        "meta": p.meta,
        # Derived, written for readers of program.json; ignored when loading.
        "identical_repeats": p.identical_repeats(),
        "variations": p.variations(),
    }
    if p.subs:
        d["subs"] = [_enc_block(b) for b in p.subs]
    return d


def from_dict(d: Any) -> Program:
    try:
        b = d["block"]
        o = d.get("options", {})
        return Program(
            inputs=_dec_named(d["inputs"]),
            block=_dec_block(b),
            sections=tuple(
                Section(
                    structure=s["structure"],
                    flow=s["flow"],
                    calls=tuple(_dec_call(c) for c in s["calls"]),
                    outer=int(s.get("outer", 1)),
                    interleave=s.get("interleave"),
                    keywords=bool(s.get("keywords", False)),
                    write=tuple(s["write"]) if s.get("write") else None,
                    bracket=bool(s.get("bracket", False)),
                )
                for s in d["sections"]
            ),
            interludes=tuple(d.get("interludes", ())),
            outputs=d.get("outputs", "single"),
            options=Options(
                fullgraph=bool(o.get("fullgraph", False)),
                dynamic=o.get("dynamic"),
                mark_dynamic=tuple((str(n), int(i), bool(s)) for n, i, s in o.get("mark_dynamic", [])),
                door=str(o.get("door", "")),
                settings=tuple(str(x) for x in o.get("settings", ())),
                autograd=tuple(str(x) for x in o.get("autograd", ())),
            ),
            seed=int(d.get("seed", 0)),
            frees=tuple(FreeVar(str(n), dec_value(v), str(h), tuple(dec_value(x) for x in rest))
                        for n, v, h, *rest in d.get("frees", [])),
            subs=tuple(_dec_block(x) for x in d.get("subs", [])),
            meta=dict(d.get("meta", {})),
        )
    except MalformedProgram:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise MalformedProgram(f"not a program: {type(e).__name__}: {e}") from e
