"""Hypothesis strategies for programs with loops and repeated blocks.

Strategies only draw choices; Hypothesis's engine does the shrinking. So loops
are drawn as "keep going?" decisions (one iteration can be deleted), every
``sampled_from`` lists the simplest alternative first, and every per-repeat
variation is a "does this repeat differ?" decision that shrinks to "no". A
shrunk program therefore reads like a hand-written repro: a helper called
twice, one or two ops, small shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from hypothesis import strategies as st

from .check import (
    strict_mark_holds,
    PER_INSTANCE,
    SubTyper,
    alias_type,
    as_separate_calls,
    broadcasts_to,
    check,
    checked,
    env_of,
    fitting_autograd,
    keyable,
    suits,
    has_columns,
    has_graph_breaks,
    live_values,
    may_require_grad,
    mutation_rules,
    returns_view,
    spec_type,
    stmt_type,
    sub_typer,
    unwritable,
    with_form,
)
from .inputs import PACKS as EXTRA_PACKS, TAKES, TAKES_LIST
from .returns import RETURNS_LIST, returning
from .settings import SETTINGS, SETTINGS_LIST
from .autograd import FEATURES as AUTOGRAD
from .forms import FORMS, FORMS_LIST, applies
from .spellings import kinds_of
from .swarm import NONE as NO_SWARM, Swarm
from .values import equal_values
from .interludes import INTERLUDES
from .ir import (
    CHILD,
    FLOWS,
    EXTRAS,
    HOLDERS,
    HOMES,
    MAX_DEPTH,
    SETTABLE,
    Fn,
    Arg,
    Block,
    Call,
    Const,
    Context,
    Free,
    FreeVar,
    MalformedProgram,
    Options,
    Program,
    Ref,
    Section,
    Shape,
    Stmt,
    TensorSpec,
    Value,
    typed_key,
    with_block,
    called,
    respelled,
    taking,
    with_call,
)
from .ops import CALL_VIEWS, MERGES, OPS, TT, D, Env, OpSpec, Reject, S, T, UNDRAWN, W, edge_values

MAX_DIM = 5
# Loop structures a block kind can be repeated by, simplest first.
STRUCTURES_BY_KIND = {
    "function": ("calls", "for_values", "for_range", "for_tuple", "while", "nested"),
    "module": ("module_list", "calls", "for_values", "for_range", "for_tuple", "while", "nested"),
}


def _has_nested_compile_region() -> bool:
    try:
        import torch

        return hasattr(torch.compiler, "nested_compile_region")
    except ImportError:  # pragma: no cover - torch is a dependency
        return False


HAS_NESTED_COMPILE_REGION = _has_nested_compile_region()


def _likely(draw, odds: int = 3) -> bool:
    """A "keep going?" decision that says yes ``odds`` times in ``odds + 1``;
    it shrinks to no, so the shrinker can delete one iteration at a time."""
    return draw(st.integers(0, odds)) > 0


def _rarely(draw, odds: int = 3) -> bool:
    """A decision that says yes once in ``odds + 1`` and shrinks to no."""
    return draw(st.integers(0, odds)) == odds


def _edge(draw, focus: bool, odds: int) -> bool:
    """A decision for one of the edge kinds (edge values, in-call rebinds,
    aliasing, packing, writes): rare, or an even chance when the draw
    ``focus``es on them."""
    return _rarely(draw, 1 if focus else odds)


# --- shapes and tensors ------------------------------------------------------------


@st.composite
def shapes(draw, max_rank: int = 4) -> Shape:
    rank = draw(st.sampled_from(tuple(r for r in (2, 3, 4, 1) if r <= max_rank)))
    return tuple(draw(st.integers(2, MAX_DIM)) if _likely(draw) else 1 for _ in range(rank))


@st.composite
def broadcastable_to(draw, shape: Shape) -> Shape:
    """A shape that broadcasts to ``shape``: a suffix with some dims set to 1."""
    keep = draw(st.integers(1, len(shape))) if shape else 0
    return tuple(1 if _rarely(draw) else d for d in shape[len(shape) - keep :])


def _layouts(shape: Shape, requires_grad: bool) -> tuple[str, ...]:
    out = ["contiguous"]
    if len(shape) >= 2:
        out.append("transposed")
    if shape:
        out.append("strided")
        if not requires_grad:
            out.append("expanded")
    return tuple(out)


@st.composite
def _variant(draw, base: TensorSpec) -> tuple[TensorSpec, str]:
    """A tensor that differs from ``base`` in one way a compiler might miss."""
    kind = draw(st.sampled_from(("view", "shape", "dtype", "requires_grad", "layout")))
    if kind == "shape":
        shape = tuple(draw(st.integers(1, MAX_DIM)) for _ in base.shape)
        return replace(base, shape=shape, layout="contiguous"), "none"
    if kind == "dtype":
        return replace(base, dtype=draw(st.sampled_from(("float64", "bfloat16")))), "none"
    if kind == "requires_grad":
        return replace(base, requires_grad=not base.requires_grad, layout="contiguous"), "none"
    if kind == "layout":
        layouts = [lay for lay in _layouts(base.shape, base.requires_grad) if lay != base.layout]
        return replace(base, layout=draw(st.sampled_from(layouts or ["contiguous"]))), "none"
    views = [v for v in CALL_VIEWS if v != "none" and _view_ok(v, base)]
    return base, draw(st.sampled_from(views or ["none"]))


def _view_ok(view: str, spec: TensorSpec) -> bool:
    try:
        CALL_VIEWS[view][1](spec_type(spec))
        return True
    except Reject:
        return False


# --- the block builder --------------------------------------------------------------


@dataclass
class _Builder:
    """State while drawing the block: every value's type in every repeat."""

    envs: list[Env]  # one per distinct call, over all sections
    types: list[dict[str, TT]]
    specs: dict[str, TensorSpec]
    inputs: list[str]
    allow_inplace: bool
    allow_buffers: bool
    python_values: bool = True  # Python slots may be per-repeat arguments or free values (else literals)
    allow_weights: bool = True
    module: bool = False  # the block is an nn.Module (a callable class attribute would bind to it)
    edges: bool = False  # draw edge values and in-call rebinds often (see programs)
    no_mutate: tuple[str, ...] = ()  # inputs that may alias the primary: never written in place
    subs: Optional[SubTyper] = None  # types calls of sub-blocks drawn so far
    tensors: list[str] = field(default_factory=list)  # values ops may read
    weights: list[tuple[str, TensorSpec]] = field(default_factory=list)
    buffers: list[tuple[str, TensorSpec]] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    arg_rows: list[list[Value]] = field(default_factory=list)  # per arg, per call
    frees: list[FreeVar] = field(default_factory=list)
    set_rows: dict[str, list[Value]] = field(default_factory=dict)  # frees rebound before each call
    body: list[Stmt] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.envs)

    def fresh(self) -> str:
        """A statement name not yet used (statements may have been pruned)."""
        used = {int(s.out[1:]) for s in self.body}
        return f"v{max(used, default=-1) + 1}"

    def rows(self) -> list[dict[str, Value]]:
        frees = {f.name: f.value for f in self.frees}
        return [frees | {n: v[i] for n, v in self.set_rows.items()}
                | {a: self.arg_rows[j][i] for j, a in enumerate(self.args)} for i in range(self.n)]

    def block(self, kind: str = "function", result: str | None = None) -> Block:
        return Block(
            kind, tuple(self.inputs), tuple(self.weights), tuple(self.buffers), tuple(self.args),
            tuple(self.body), result or (self.body[-1].out if self.body else self.inputs[0]),
        )


def _agreed(values: list) -> object:
    first = values[0]
    if any(repr(v) != repr(first) for v in values[1:]):
        raise Reject("differs between repeats")
    return first


@st.composite
def _per_call_values(draw, choices: tuple[Value, ...], n: int) -> list[Value]:
    """One value per call; each call after the first differs only if drawn so,
    then at even odds by value alone (another value of the first's type: dim=-1
    and dim=-2, 2 and 3): a difference of type the region key shows anyway,
    one of value only where the key keeps the constant (an int) or forgets it
    (a float, KI-001). Drawn from all choices alike, two ints that differ were
    one program in fifteen, and a pass that forgot ints went unseen for two
    minutes."""
    first = draw(st.sampled_from(choices))
    same = [c for c in choices if type(c) is type(first) and repr(c) != repr(first)]
    out = [first]
    for _ in range(n - 1):
        if not _likely(draw, 1):
            out.append(first)
        else:
            out.append(draw(st.sampled_from(same if same and draw(st.booleans()) else choices)))
    return out


@st.composite
def _rebound_values(draw, choices: tuple[Value, ...], n: int) -> list[Value]:
    """Per-call values of an in-call rebinding: some call after the first
    rebinds to another value where the choices have one (a rebinding to the
    value already there is one a stale read gets right; they were more than
    half of all)."""
    values = draw(_per_call_values(choices, n))
    first = repr(typed_key(values[0]))
    others = [v for v in choices if repr(typed_key(v)) != first]
    if others and all(repr(typed_key(v)) == first for v in values[1:]):
        values[-1] = draw(st.sampled_from(others))
    return values


def _common_choices(slot: S, primaries: list[TT], edges: bool = False) -> tuple[Value, ...]:
    """Values valid in every repeat: the slot's choices, or its edge values."""
    sets = [edge_values(slot, p) if edges else slot.choices(p) for p in primaries]
    keys = [{repr(typed_key(v)) for v in s} for s in sets[1:]]
    return tuple(v for v in sets[0] if all(repr(typed_key(v)) in k for k in keys))


def _may_mutate(b: _Builder, name: str) -> bool:
    """A cheap pre-filter of in-place targets (mutation_rules has the last word):
    a contiguous float32 input without grad, or a fresh, unread intermediate."""
    if name in b.inputs:
        spec = b.specs[name]
        return (name != b.inputs[0] and name not in b.no_mutate and not spec.requires_grad
                and spec.layout == "contiguous")
    made = next((s for s in b.body if s.out == name), None)
    if made is None or OPS[made.op].view or OPS[made.op].saves_output:
        return False
    return not any(isinstance(o, Ref) and o.name == name for s in b.body for o in s.operands)


def _shape_rule(rule, shape):
    """A slot's rule applied to a primary's shape; operands are drawn before
    the op's rank check, so a rule that needs more dims rejects the draw."""
    try:
        return rule(shape)
    except IndexError:
        raise Reject("the op's shape rule needs a higher rank") from None


def _draw_operands(draw, b: _Builder, op: OpSpec):
    """Operands for ``op``, plus the weights, buffers and args they would add."""
    candidates = [n for n in b.tensors[::-1] if _may_mutate(b, n)] if op.inplace else b.tensors[::-1]
    if not candidates:
        raise Reject("nothing here may be mutated in place")
    primary = draw(st.sampled_from(candidates))  # latest value first: chains shrink well
    primaries = [t[primary] for t in b.types]
    operands: list = [Ref(primary)]
    new_state: list[tuple[str, TensorSpec, bool]] = []
    new_args: list[tuple[str, list[Value]]] = []
    for slot in op.slots[1:]:
        if isinstance(slot, T):
            def fits(name: str) -> bool:
                ts = [t[name] for t in b.types]
                if slot.relation == "same":
                    return all(a.shape == p.shape for a, p in zip(ts, primaries))
                if slot.relation == "broadcast":
                    return all(broadcasts_to(a.shape, p.shape) for a, p in zip(ts, primaries))
                return True

            good = [n for n in b.tensors[::-1] if fits(n)]
            operands.append(Ref(draw(st.sampled_from(good or b.tensors[::-1]))))
        elif isinstance(slot, W):
            if slot.buffer and not b.allow_buffers:
                raise Reject("no buffers here")
            if not b.allow_weights:
                raise Reject("a function sub-block owns no parameters")
            index = len(b.weights) + len(b.buffers) + len(new_state)
            name = f"{'r' if slot.buffer else 'w'}{index}"
            shape = _agreed([_shape_rule(slot.shape, p.shape) for p in primaries])
            new_state.append((name, TensorSpec(shape, "float32", not slot.buffer), slot.buffer))
            operands.append(Ref(name))
        elif isinstance(slot, D):
            operands.append(Const(_agreed([_shape_rule(slot.value, p.shape) for p in primaries])))
        elif isinstance(slot, S):
            choices = _common_choices(slot, primaries)
            edges = _common_choices(slot, primaries, edges=True) if slot.edges else ()
            if edges and _edge(draw, b.edges, 2):  # an edge value: signed zero, NaN, inf, huge, int64, 1 vs True
                choices = edges + choices[:1]
            if not choices:
                raise Reject("no value valid in every repeat")
            if not b.python_values:
                operands.append(Const(draw(st.sampled_from(choices))))
            elif b.n > 1 and _likely(draw, 1):
                name = f"s{len(b.args) + sum(isinstance(a[0], str) for a in new_args if isinstance(a, tuple))}"
                new_args.append((name, draw(_per_call_values(choices, b.n))))
                operands.append(Arg(name))
            elif _edge(draw, b.edges, 2):  # read at run time from a global, closure, class, object or argument
                name = f"p{len(b.frees) + sum(not (isinstance(a, tuple) and isinstance(a[0], str)) for a in new_args)}"
                value = draw(st.sampled_from(choices))
                homes = [h for h in HOMES if not (h == "class_attr" and b.module and isinstance(value, Fn))]
                free = FreeVar(name, value, draw(st.sampled_from(homes)))
                others = [c for c in choices if repr(c) != repr(value)]
                if free.home == "dict" and others and draw(st.booleans()):  # OPTS.get('p0', default)
                    free = replace(free, default=(draw(st.sampled_from(others)),))
                if free.home in SETTABLE and b.n > 1 and _edge(draw, b.edges, 2):  # rebound before every call
                    values = draw(_rebound_values(choices, b.n))
                    new_args.append((replace(free, value=values[0]), values))
                else:
                    new_args.append(free)
                operands.append(Free(name))
            else:
                operands.append(Const(draw(st.sampled_from(choices))))
    return operands, new_state, new_args


def _add_stmt(b: _Builder, stmt: Stmt, op: OpSpec, new_state=(), new_args=()) -> None:
    """Type-check ``stmt`` in every repeat and commit it, or raise Reject."""
    state_types = {n: TT(spec.shape, spec.dtype) for n, spec, _ in new_state}
    new_sets = [a for a in new_args if isinstance(a, tuple) and isinstance(a[0], FreeVar)]
    new_frees = [a for a in new_args if isinstance(a, FreeVar)] + [f for f, _ in new_sets]
    new_args = [a for a in new_args if isinstance(a, tuple) and isinstance(a[0], str)]
    arg_values = dict(new_args) | {f.name: [f.value] * b.n for f in new_frees} | {f.name: v for f, v in new_sets}
    out_types = []
    for i, (types, row, env) in enumerate(zip(b.types, b.rows(), b.envs)):
        out_types.append(
            stmt_type(op, stmt, types | state_types, row | {a: v[i] for a, v in arg_values.items()}, env, b.subs)
        )
    candidate = replace(b.block(), body=(*b.body, stmt), result=stmt.out)
    try:
        mutation_rules(candidate, b.specs, finished=False)
    except MalformedProgram as e:
        raise Reject(str(e)) from e
    b.body.append(stmt)
    for types, t in zip(b.types, out_types):
        types[stmt.out] = t
    for name, spec, buffer in new_state:
        (b.buffers if buffer else b.weights).append((name, spec))
        for types in b.types:
            types[name] = TT(spec.shape, spec.dtype)
    for name, values in new_args:
        b.args.append(name)
        b.arg_rows.append(values)
    b.frees.extend(new_frees)
    b.set_rows.update({f.name: v for f, v in new_sets})
    if op.inplace:
        target = stmt.operands[0].name
        b.tensors.remove(target)
    b.tensors.append(stmt.out)


def _try_stmt(draw, b: _Builder, op: OpSpec) -> bool:
    """Add one ``op`` statement; an op that does not fit the drawn operands gets
    two more tries, so ops with narrow domains (conv2d, bmm) still appear."""
    if op.inplace and not b.allow_inplace:
        return False
    for _ in range(3):
        try:
            operands, new_state, new_args = _draw_operands(draw, b, op)
            _add_stmt(b, Stmt(b.fresh(), op.name, tuple(operands)), op, new_state, new_args)
            return True
        except Reject:
            continue
    return False


def _close(b: _Builder, chained: list[int]) -> None:
    """Bring the result back to the carried value's type in chained repeats;
    and make it read the carried value if the block draws random numbers (a
    chain of calls that ignore their input leaves all but the last one dead,
    and a compiler drops dead code with its draws)."""
    primary = b.inputs[0]
    last = b.body[-1].out if b.body else primary
    random = any(OPS[s.op].random for s in b.body)
    if b.body and all(
        (b.types[i][last].shape, b.types[i][last].dtype) == (b.types[i][primary].shape, b.types[i][primary].dtype)
        for i in chained
    ) and (not random or primary in live_values(b.block())):
        return
    fits = all(broadcasts_to(t[last].shape, t[primary].shape) for t in b.types)
    for op in (MERGES if fits else MERGES[2:]):
        try:
            _add_stmt(b, Stmt(b.fresh(), op, (Ref(primary), Ref(last))), OPS[op])
            return
        except Reject:
            continue
    raise Reject("cannot close the chain")  # pragma: no cover - merge_mean takes anything


def _tie_python_values(b: _Builder) -> None:
    """Merge into the result each value computed from a Python value (an argument each repeat chooses, a free
    value read at run time) that nothing reads: Dynamo drops dead code, so a repeat's differing argument that
    reaches no output differs in guards alone, and neither the pass's region keys nor any output would show
    what it computes (a third of drawn blocks with such values left them all dead)."""
    live = live_values(b.block())
    for stmt in list(b.body):
        if stmt.out in live or not any(isinstance(o, (Arg, Free)) for o in stmt.operands) or stmt not in b.body:
            continue
        try:
            _add_stmt(b, Stmt(b.fresh(), "merge_mean", (Ref(b.body[-1].out), Ref(stmt.out))), OPS["merge_mean"])
        except Reject:  # (a value whose shape differs between repeats, ...): dropped, with what reads it
            _drop(b, lambda s, dead=stmt: s is dead)
        live = live_values(b.block())


def _prune_dead_random(b: _Builder) -> None:
    """Drop random ops nothing uses, and what reads them: a compiler may drop
    dead code, and with it draws from the generator eager makes."""
    live = live_values(b.block())
    _drop(b, lambda stmt: stmt.out not in live and OPS[stmt.op].random)


def _drop(b: _Builder, dead: Callable[[Stmt], bool]) -> None:
    """Drop the dead statements ``dead`` picks and every statement that reads what is dropped (dead too: a
    value read by a live one is live)."""
    dropped: set[str] = set()
    body = []
    for stmt in b.body:
        if dead(stmt) or dropped & {o.name for o in stmt.operands if isinstance(o, Ref)}:
            dropped.add(stmt.out)
            continue
        body.append(stmt)
    b.body = body


# --- the block hierarchy ---------------------------------------------------------------

# Names sub-blocks are drawn under, in order: a shrunk program keeps the first.
SUB_NAMES = ("mlp", "attn", "gate", "proj", "mix", "ffn", "head", "core", "tail", "stem")
SUB_STMTS = 3  # statements per sub-block body, child calls included


@dataclass
class _Hierarchy:
    """Sub-blocks drawn so far for one program. Every sub-block is drawn for
    the layer's primary type in each repeat, and is called only on values of
    exactly that type, so it is valid wherever it is called."""

    primaries: list[TT]
    envs: list[Env]
    by_category: dict[str, list[OpSpec]]
    allow_inplace: bool
    subs: list[Block] = field(default_factory=list)
    regions: bool = False  # every sub-block marked nested_compile_region (a swarm boost)

    def typer(self) -> SubTyper:
        stand_in = Program((), Block("function", ("x",), (), (), (), (), "x"), (), subs=tuple(self.subs))
        return sub_typer(stand_in)

    def sub(self, name: str) -> Block:
        return next(sb for sb in self.subs if sb.name == name)

    def height(self, name: str) -> int:
        return 1 + max((self.height(n) for n, _ in self.sub(name).children()), default=0)


def _draw_op(draw, by_category: dict[str, list[OpSpec]]) -> OpSpec:
    # Category first, then op: each kind of op gets an even share, so a
    # category of few ops (dtype conversion) is drawn as often as one of many.
    return draw(st.sampled_from(by_category[draw(st.sampled_from(list(by_category)))]))


def _draw_sub(draw, h: _Hierarchy, level: int, parent_kind: str) -> str:
    """A new sub-block at ``level`` (the layer is level 1); returns its name."""
    if len(h.subs) >= len(SUB_NAMES):
        raise Reject("no sub-block names left")
    kind = "module" if parent_kind == "module" and draw(st.booleans()) else "function"
    x = h.primaries[0]
    b = _Builder(list(h.envs), [{"x": t} for t in h.primaries], {"x": TensorSpec(x.shape, x.dtype)}, ["x"],
                 allow_inplace=h.allow_inplace, allow_buffers=False, python_values=False,
                 allow_weights=kind == "module", subs=h.typer())
    b.tensors = ["x"]
    weighted = [op for group in h.by_category.values() for op in group
                if any(isinstance(slot, W) and not slot.buffer for slot in op.slots)]
    if kind == "module" and weighted and _likely(draw, 1):  # a module's first op owns parameters
        _try_stmt(draw, b, draw(st.sampled_from(weighted)))
    attempts = 0
    while attempts < 3 * SUB_STMTS and len(b.body) < SUB_STMTS and (not b.body or _likely(draw, 2)):
        attempts += 1
        if level < MAX_DEPTH and _rarely(draw, 2):
            _try_child(draw, b, h, level + 1, kind)
        else:
            _try_stmt(draw, b, _draw_op(draw, h.by_category))
    if not b.body:
        _add_stmt(b, Stmt("v0", "neg", (Ref("x"),)), OPS["neg"])
    _close(b, list(range(b.n)))
    if returns_view(b.block()):
        _add_stmt(b, Stmt(b.fresh(), "clone", (Ref(b.body[-1].out),)), OPS["clone"])
    name = next(n for n in SUB_NAMES if n not in {sb.name for sb in h.subs})  # children took theirs
    block = replace(b.block(kind), name=name,
                    compile_region=HAS_NESTED_COMPILE_REGION and (_rarely(draw, 2) or h.regions))
    h.subs.append(_held(draw, block, h))
    return block.name


def _held(draw, block: Block, h: _Hierarchy) -> Block:
    """A module block with module children draws how it holds them."""
    if block.kind == "module" and any(h.sub(n).kind == "module" for n, _ in block.children()):
        return replace(block, holder=draw(st.sampled_from(HOLDERS)))
    return block


def _try_child(draw, b: _Builder, h: _Hierarchy, level: int, parent_kind: str, site: str | None = None) -> bool:
    """Call a sub-block (one drawn before, or a new one at ``level``) on a value
    of the primary's type: ``site``, or one drawn from the values in scope."""
    sites = [t for t in b.tensors[::-1] if all(types.get(t) == p for types, p in zip(b.types, h.primaries))]
    if site is not None:
        sites = [site] if site in sites else []
    if not sites:
        return False
    reusable = [sb.name for sb in h.subs
                if (parent_kind == "module" or sb.kind == "function") and level + h.height(sb.name) - 1 <= MAX_DEPTH]
    try:
        if reusable and _likely(draw, 1):
            name = draw(st.sampled_from(reusable))
        elif level <= MAX_DEPTH:
            name = _draw_sub(draw, h, level, parent_kind)
        else:
            return False
        b.subs = h.typer()
        slot = 0
        if h.sub(name).kind == "module":
            slots = sorted({k for n, k in b.block().children() if n == name})
            slot = draw(st.sampled_from(slots)) if slots and _rarely(draw) else len(slots)
        _add_stmt(b, Stmt(b.fresh(), CHILD, (Ref(draw(st.sampled_from(sites))), Const(name), Const(slot))), OPS[CHILD])
        return True
    except Reject:
        return False


def _transformer(draw, b: _Builder, h: _Hierarchy, kind: str) -> None:
    """The layer of a transformer: norm -> block -> residual, twice (stops
    early where an op does not fit)."""
    norm = OPS["layer_norm"]
    try:
        for _ in range(2):
            cur = b.tensors[-1] if b.body else b.inputs[0]
            if _likely(draw):  # each norm and residual can shrink away on its own
                shape = _agreed([_shape_rule(norm.slots[1].value, types[cur].shape) for types in b.types])
                _add_stmt(b, Stmt(b.fresh(), norm.name, (Ref(cur), Const(shape))), norm)
            if not _try_child(draw, b, h, 2, kind, site=b.tensors[-1]):
                return
            if _likely(draw):
                _add_stmt(b, Stmt(b.fresh(), "merge_add", (Ref(cur), Ref(b.body[-1].out))), OPS["merge_add"])
    except Reject:
        return


# --- sections and repeats ------------------------------------------------------------


@st.composite
def _contexts(draw, n: int, allow_inference: bool) -> list[Context]:
    """Per-call global state: each field unused, constant, or varying."""
    fields_: dict[str, list] = {}
    if _rarely(draw):
        fields_["grad"] = draw(_per_call_values((False, True), n))
    if _rarely(draw):
        fields_["autocast"] = draw(_per_call_values((True, False), n))
    if "grad" not in fields_ and allow_inference and _rarely(draw, 5):
        fields_["inference"] = draw(_per_call_values((True, False), n))
    if _rarely(draw, 5):
        fields_["default_dtype"] = draw(_per_call_values(("float64", "float32"), n))
    return [Context(**{k: v[i] for k, v in fields_.items()}) for i in range(n)]


@dataclass
class _SectionPlan:
    structure: str
    flow: str
    n: int
    outer: int
    contexts: list[Context]
    tensors: list[tuple[str | None, str]]  # (program input, view) per call
    aliases: list[str]  # what each call passes as the first extra input (generators.ir.ALIASES)
    frozen: list[bool]
    keywords: bool
    interleave: str | None


@st.composite
def programs(
    draw,
    max_stmts: int = 6,
    max_repeats: int = 4,
    ops: tuple[str, ...] | None = None,
    max_sections: int = 2,
    breaks: bool = True,
    hierarchy: bool = True,
    edges: bool = False,
    swarm: Swarm = NO_SWARM,
) -> Program:
    """A valid program: a layer block (calling sub-blocks, when ``hierarchy``)
    run by one or two repetition sections. ``edges`` draws the edge kinds
    (edge values, in-call rebinds, aliasing, packed inputs and arguments,
    writes between repeats) at even odds instead of rarely. ``swarm``
    switches features off (or boosts some) for this draw (generators.swarm)."""
    by_category: dict[str, list[OpSpec]] = {}
    for name in ops or tuple(n for n in OPS if OPS[n].category not in UNDRAWN):
        by_category.setdefault(OPS[name].category, []).append(OPS[name])
    kept = {c: g for c, g in by_category.items() if swarm.allows(f"op:{c}")}
    by_category = kept if len(kept) >= 2 else by_category
    edges = edges or swarm.boosts("edges")
    hierarchy = hierarchy and swarm.allows("part:hierarchy")
    kind = draw(st.sampled_from(swarm.keep("kind", ("function", "module"))))
    main = draw(shapes())
    x_grad = draw(st.booleans())
    x = TensorSpec(main, draw(st.sampled_from(("float32", "float32", "float64", "bfloat16"))), x_grad)
    if _rarely(draw):
        x = replace(x, layout=draw(st.sampled_from(_layouts(main, x_grad))))
    specs: dict[str, TensorSpec] = {"x": x}
    extras: list[str] = []
    while len(extras) < 2 and _edge(draw, edges, 2):
        grad = draw(st.booleans())
        name = f"y{len(extras)}"
        specs[name] = TensorSpec(draw(broadcastable_to(main)), "float32", grad)
        extras.append(name)

    n_sections = 1 + (max_sections > 1 and swarm.allows("part:sections:2") and _rarely(draw, 4))
    compile_region = HAS_NESTED_COMPILE_REGION and (_rarely(draw, 4) or swarm.boosts("compile_region"))
    # per-repeat instances: attributes, or closures of a factory
    attrs = _rarely(draw, 3 if kind == "module" else 6) or swarm.boosts("attrs")
    interludes_allowed = [name for name, i in INTERLUDES.items() if (breaks or not i.breaks)
                          and swarm.allows("part:interludes")]
    plans: list[_SectionPlan] = []
    for k in range(n_sections):
        structures = STRUCTURES_BY_KIND[kind]
        if attrs:
            structures = tuple(s for s in structures if s in PER_INSTANCE) if kind == "module" else ("calls",)
        structure = draw(st.sampled_from(swarm.keep("structure", structures)))
        flow = draw(st.sampled_from(swarm.keep("flow", FLOWS)))
        n = 2
        while n < max_repeats and _likely(draw, 1):
            n += 1
        outer = 2 if structure == "nested" else 1
        if structure == "nested":
            n = max(1, n // 2)
        tensors: list[tuple[str | None, str]] = [(None, "none")] * n
        if flow == "fanout" and _likely(draw, 1):
            tensors = [("x", "none")]
            for _ in range(n - 1):
                if not _likely(draw, 1):
                    tensors.append(("x", "none"))
                    continue
                spec, view = draw(_variant(x))
                if spec == x:
                    tensors.append(("x", view))
                else:
                    name = f"t{len([s for s in specs if s.startswith('t')])}"
                    specs[name] = spec
                    tensors.append((name, "none"))
        contexts = draw(_contexts(n, flow == "fanout")) if swarm.allows("part:contexts") else [Context()] * n
        frozen = [False] * n
        if kind == "module" and structure in PER_INSTANCE and _rarely(draw):
            frozen = [False] + [draw(st.booleans()) for _ in range(n - 1)]
        interleave = draw(st.sampled_from(interludes_allowed)) if interludes_allowed and _rarely(draw, 4) else None
        aliases = [""] * n
        if extras and _edge(draw, edges, 3):  # the primary (or a view of it) passed again as the first extra
            aliases = draw(_per_call_values(("same", "view", ""), n))
        plans.append(_SectionPlan(structure, flow, n, outer, contexts, tensors, aliases, frozen, draw(st.booleans()),
                                  interleave))

    inference = any(c.inference for p in plans for c in p.contexts)
    all_calls = [(p, i) for p in plans for i in range(p.n)]
    carried = spec_type(x)
    envs, types = [], []
    for p, i in all_calls:
        tensor, view = p.tensors[i]
        primary = carried if tensor is None else CALL_VIEWS[view][1](spec_type(specs[tensor]))
        envs.append(env_of(p.contexts[i]))
        scope = {"x": primary, **{n: spec_type(specs[n]) for n in extras}}
        if p.aliases[i]:
            if not primary.shape and p.aliases[i] == "view":
                p.aliases[i] = "same"
            scope[extras[0]] = alias_type(p.aliases[i], primary)
        types.append(scope)
    aliased = tuple(extras[:1]) if any(a for p in plans for a in p.aliases) else ()
    b = _Builder(envs, types, specs, ["x", *extras], allow_inplace=not inference, allow_buffers=not inference,
                 module=kind == "module", no_mutate=aliased, edges=edges, python_values=swarm.allows("part:args"))
    b.tensors = ["x", *extras]
    h = None
    if hierarchy and _likely(draw, 2):
        sub_ops = {c: [op for op in group if not op.random] for c, group in by_category.items()}
        # A decorated layer decorates its sub-blocks in one draw in two: a hierarchy of regions (an outer
        # invoke_subgraph whose body calls inner ones, torch's nested-subgraph path), which independent odds
        # drew in one program in ~130 (a planted fault there went unfound by 120-s campaigns).
        nest = compile_region and _likely(draw, 1)
        h = _Hierarchy([t["x"] for t in types], envs, {c: g for c, g in sub_ops.items() if g}, not inference,
                       regions=swarm.boosts("compile_region") or nest)
        if swarm.allows("op:norm") and _rarely(draw, 3):  # a swarm draw may leave norms out
            _transformer(draw, b, h, kind)
    attempts = 0
    while attempts < 4 * max_stmts and len(b.body) < max_stmts and (not b.body or _likely(draw, 3)):
        attempts += 1
        if h is not None and _rarely(draw, 1 if h.regions else 2):  # nested regions need two calls at least
            _try_child(draw, b, h, 2, kind)
        else:
            _try_stmt(draw, b, _draw_op(draw, by_category))
    if not b.body:
        _add_stmt(b, Stmt("v0", "neg", (Ref("x"),)), OPS["neg"])
    chained = [j for j, (p, _) in enumerate(all_calls) if p.flow != "fanout"]
    if chained:
        try:
            _close(b, chained)
        except Reject:
            raise MalformedProgram("generator could not close the chain")  # noqa: B904

    _tie_python_values(b)
    _prune_dead_random(b)
    no_grad = any(c.grad is False or c.inference for p in plans for c in p.contexts)
    if no_grad and returns_view(b.block()):
        _add_stmt(b, Stmt(b.fresh(), "clone", (Ref(b.body[-1].out),)), OPS["clone"])
    block = replace(b.block(kind), compile_region=compile_region, attrs=attrs)
    if len(block.inputs) > 1 and _edge(draw, edges, 3):
        # Python arguments (a function block's weights too) after the tensors: no tensor keywords
        positional_args = bool(block.args and not attrs) or (kind == "function" and bool(block.weights or block.buffers))
        # (tensors by keyword fit fewer blocks: where they fit, they are drawn at twice the weight)
        block = replace(block, extras=draw(st.sampled_from([e for e in EXTRAS[1:] for _ in range(
            0 if EXTRA_PACKS[e].keywords and positional_args else 2 if EXTRA_PACKS[e].keywords else 1)])))
    if block.args and not attrs and _edge(draw, edges, 3):
        block = replace(block, pack=draw(st.sampled_from(("dataclass", "module"))))
    read = {o.name for st_ in block.body for o in st_.operands if isinstance(o, Free)}
    # rebound only where a live statement reads it: a rebinding only dead code reads tests nothing
    live = live_values(block)
    read_live = {o.name for st_ in block.body if st_.out in live for o in st_.operands if isinstance(o, Free)}
    if h is not None:
        block = _held(draw, block, h)
    subs = called(block, h.subs) if h is not None else ()  # dead code may have dropped a call
    has_weights = bool(b.weights) or any(sb.weights for sb in subs)  # requires_grad_(False) reaches children
    sections = []
    j = 0
    for p in plans:
        calls = []
        for i in range(p.n):
            tensor, view = p.tensors[i]
            args = tuple(b.arg_rows[a][j] for a in range(len(b.args)))
            sets = tuple((f, b.set_rows[f][j]) for f in b.set_rows if f in read_live)
            alias = p.aliases[i] if len(b.inputs) > 1 else ""
            calls.append(Call(args, tensor, view, p.contexts[i], p.frozen[i] and has_weights, sets, alias))
            j += 1
        sections.append(Section(p.structure, p.flow, tuple(calls), p.outer, p.interleave, p.keywords and bool(b.args)))

    interludes = []
    for _ in sections[1:]:
        interludes.append(draw(st.sampled_from(interludes_allowed)) if interludes_allowed and _likely(draw, 1) else None)
    fanout = any(s.flow == "fanout" for s in sections)
    outputs = draw(st.sampled_from(("tuple", "dict") if fanout else ("single", "tuple", "dict")))

    program = Program(
        inputs=tuple(specs.items()),
        block=block,
        sections=tuple(sections),
        interludes=tuple(interludes),
        outputs=outputs,
        seed=draw(st.integers(0, 2**16)),
        frees=tuple(f for f in b.frees if f.name in read),
        subs=subs,
    )
    program = _fix_loops(program)
    if swarm.allows("part:writes"):
        program = _draw_writes(draw, program, edges)
    if swarm.allows("part:retypes"):
        program = _draw_retypes(draw, program, edges)
    if swarm.allows("part:forms"):
        program = _draw_forms(draw, program, edges)
    if swarm.allows("part:spellings"):
        program = _draw_spellings(draw, program)
    program = replace(program, options=draw(_options(program)))
    program = _draw_settings(draw, program, edges)
    program = _draw_returns(draw, program, edges)
    program = _draw_takes(draw, program, edges)
    program = _draw_late_settings(draw, program, edges)
    program = _draw_autograd(draw, program, edges)
    program = _draw_reuse(draw, program, edges)
    program = _draw_brackets(draw, program)
    check(program)  # valid by construction; a failure here is a generator bug
    return program


def _draw_brackets(draw, program: Program) -> Program:
    """Maybe enter a section's one context once around its calls (Section.bracket), as a training loop under
    ``torch.autocast`` or ``torch.no_grad`` does, where every call of it runs in the same context: even odds."""
    sections = list(program.sections)
    for k, s in enumerate(sections):
        if s.calls[0].context != Context() and _rarely(draw, 1):
            candidate = replace(program, sections=(*sections[:k], replace(s, bracket=True), *sections[k + 1:]))
            if checked(candidate) is not None:
                program, sections = candidate, list(candidate.sections)
    return program


def _draw_reuse(draw, program: Program, focus: bool = False) -> Program:
    """Maybe have each nested_compile_region body reused by a key the program computes (``reuse_hash_fn``,
    Block.reuse "hash") instead of Dynamo's guards, where the key can read all a call decides (check.keyable)."""
    blocks = [b for b in program.blocks() if keyable(program, b) and _edge(draw, focus, 2)]
    for b in blocks:
        program = with_block(program, replace(b, reuse="hash"))
    return program


def _draw_autograd(draw, program: Program, focus: bool = False) -> Program:
    """Maybe give the program one or two autograd features (generators.autograd: hooks, saved tensors,
    how the gradients are asked for), of two families, where they fit."""
    chosen: list[str] = []
    while len(chosen) < 2 and _edge(draw, focus, 6 if not chosen else 2):
        taken = {AUTOGRAD[n].family for n in chosen}
        pool = [n for n in fitting_autograd(program) if AUTOGRAD[n].family not in taken]
        if not pool:
            break
        chosen.append(draw(st.sampled_from(pool)))
    return replace(program, options=replace(program.options, autograd=tuple(chosen))) if chosen else program


def _draw_takes(draw, program: Program, focus: bool = False) -> Program:
    """Maybe give the layer block, and each sub-block, one more argument
    beside its tensors (generators.inputs.TAKES), each layer repeat passing
    a variant of it: where the block's result is a float and no door calls it."""
    kinds = [t.name for t in TAKES_LIST if t.fullgraph or not program.options.fullgraph]
    if _edge(draw, focus, 4):
        take = TAKES[draw(st.sampled_from(kinds))]
        variants = [v for v, _ in take.variants]
        first = draw(st.sampled_from(variants))
        sections = tuple(replace(s, calls=tuple(
            replace(c, given=draw(st.sampled_from(variants)) if len(variants) > 1 and _likely(draw, 1) else first)
            for c in s.calls)) for s in program.sections)
        program = checked(replace(program, block=replace(program.block, takes=take.name), sections=sections)) or program
    for b in program.subs:
        if _edge(draw, focus, 6):
            kind = draw(st.sampled_from([k for k in kinds if TAKES[k].sub]))
            program = checked(taking(program, b.name, kind)) or program
    return program


def _draw_returns(draw, program: Program, focus: bool = False) -> Program:
    """Maybe make the layer block, and each sub-block, return more than its
    result (generators.returns): where the program can (no door, no fullgraph
    for a data-dependent size)."""
    kinds = [r.name for r in RETURNS_LIST if r.fullgraph or not program.options.fullgraph]
    for b in program.blocks():
        if _edge(draw, focus, 4 if not b.name else 6):
            program = checked(returning(program, b.name, draw(st.sampled_from(kinds)))) or program
    return program


def _draw_settings(draw, program: Program, focus: bool = False) -> Program:
    """Maybe compile under one or two of torch's settings (generators.settings), of two families; those about
    data-dependent sizes come later (``_draw_late_settings``), once what the block returns and takes is drawn."""
    chosen: list[str] = []
    while len(chosen) < 2 and _edge(draw, focus, 5 if not chosen else 2):
        taken = {SETTINGS[n].family for n in chosen}
        pool = [s.name for s in SETTINGS_LIST for _ in range(s.weight) if s.family not in taken
                and not s.data_dependent and suits(s.name, program)]
        chosen.append(draw(st.sampled_from(pool)))
    return replace(program, options=replace(program.options, settings=tuple(chosen))) if chosen else program


def _draw_late_settings(draw, program: Program, focus: bool = False) -> Program:
    """Maybe a setting about data-dependent sizes (capturing them), where some size the program computes
    follows tensor values: even odds under focus, else one in three. Draws nothing elsewhere, so a program
    without such a size is drawn as before."""
    chosen = program.options.settings
    pool = [s.name for s in SETTINGS_LIST for _ in range(s.weight) if s.data_dependent and suits(s.name, program)]
    if len(chosen) >= 2 or not pool or not _edge(draw, focus, 2):
        return program
    return replace(program, options=replace(program.options, settings=(*chosen, draw(st.sampled_from(pool)))))


def _draw_writes(draw, program: Program, focus: bool = False) -> Program:
    """Maybe write an extra input in place after every call of a section (the
    repeats after it read new values), where eager allows it."""
    sections = list(program.sections)
    # only inputs a write fits (about two in three drawn writes fell on one with grad, or unused, before)
    extras = program.block.inputs[1:]
    writable = [name for name in extras if not unwritable(program, name)]
    for k, s in enumerate(sections):
        if not extras or not _edge(draw, focus, 2):
            continue
        if not writable:
            # Most extra inputs require grad or are not float32 (a write between calls was drawn in one program
            # in fifty): one the block reads becomes a state the forward updates in place (a cache, a running
            # statistic), where that leaves a valid program.
            made = [m for m in (_made_writable(program, name) for name in extras) if m is not program]
            made = [m for m in made if any(not unwritable(m, name) for name in extras)]
            if not made:
                continue
            program = draw(st.sampled_from(made))
            writable = [name for name in extras if not unwritable(program, name)]
            sections = list(program.sections)
        write = (draw(st.sampled_from(writable)), draw(st.sampled_from(("direct", "view"))))
        candidate = replace(program, sections=tuple(replace(t, write=write) if i == k else t
                                                    for i, t in enumerate(sections)))
        try:
            check(candidate)
        except MalformedProgram:
            continue
        sections[k] = candidate.sections[k]
    return replace(program, sections=tuple(sections))


def _made_writable(program: Program, name: str) -> Program:
    """``program`` with input ``name`` a contiguous float32 tensor without grad (unchanged where that is not
    a valid program)."""
    spec = dict(program.inputs)[name]
    if not spec.shape:
        return program
    made = replace(spec, dtype="float32", requires_grad=False, layout="contiguous")
    return checked(replace(program, inputs=tuple((n, made if n == name else s) for n, s in program.inputs))) or program


def _draw_retypes(draw, program: Program, focus: bool = False) -> Program:
    """Maybe give one later repeat an argument (or an in-call rebinding) equal
    under ``==`` to the first repeat's but of another Python type (2 and
    2.0, True and 1, an int subclass, a tuple and a list): by Python's rules
    another call, which a cache comparing with ``==`` takes for the same."""
    rows = [(k, i) for k, s in enumerate(program.sections) for i in range(len(s.calls)) if (k, i) != (0, 0)]
    first = program.sections[0].calls[0]
    if not rows or not (first.args or first.sets) or not _edge(draw, focus, 2):
        return program
    k, i = draw(st.sampled_from(rows))
    call = program.sections[k].calls[i]
    slots = [("arg", j) for j in range(len(call.args))] + [("set", j) for j in range(len(call.sets))]
    where, j = draw(st.sampled_from(slots)) if slots else ("arg", -1)
    if j < 0:
        return program
    old = first.args[j] if where == "arg" else dict(first.sets).get(call.sets[j][0], call.sets[j][1])
    alternatives = equal_values(old)
    if not alternatives:
        return program
    new = draw(st.sampled_from(alternatives))
    if where == "arg":
        call = replace(call, args=call.args[:j] + (new,) + call.args[j + 1:])
    else:
        call = replace(call, sets=call.sets[:j] + ((call.sets[j][0], new),) + call.sets[j + 1:])
    return checked(with_call(program, k, i, call)) or program


def _draw_forms(draw, program: Program, focus: bool = False) -> Program:
    """Maybe write some repeats of separate-call sections in another
    call-site form (generators.forms): keywords in another order, ``*args``,
    a default taken, ``functools.partial``, a wrapper, a bound or unbound
    method, a subclass instance, a tensor subclass."""
    b = program.block
    names = [f.name for f in FORMS_LIST if applies(f, b.kind, len(b.args), not (b.pack or b.attrs))]
    # A form that needs more Python arguments than most blocks take (keywords
    # in another order: two) applies to few programs: at even odds among them,
    # or a 2,000-program draw can miss it.
    narrow = [n for n in names if FORMS[n].min_args > 1]
    if not names or not _edge(draw, focus or bool(narrow), 2):
        return program
    loops = [k for k, s in enumerate(program.sections) if len(s.calls) > 1]
    if not any(s.structure == "calls" for s in program.sections) and loops and _likely(draw, 1):
        program = as_separate_calls(program, draw(st.sampled_from(loops))) or program
    for k, s in enumerate(program.sections):
        if s.structure != "calls":
            continue
        for i in range(len(s.calls)):
            if _likely(draw, 1):
                pool = narrow if narrow and draw(st.booleans()) else names
                program = with_form(program, k, i, draw(st.sampled_from(pool))) or program
    return program


def _draw_spellings(draw, program: Program) -> Program:
    """Maybe write some statements in another spelling of their op
    (generators.spellings: ``torch.relu`` for ``F.relu``, a method, a module,
    an aten overload, in place, ``out=``): each a node of its own in the
    graph a backend is given. A statement keeps its default unless drawn
    otherwise, so a shrunk program does too."""
    grad = may_require_grad(program)
    for b in program.blocks():
        for i, stmt in enumerate(b.body):
            kinds = [k for k in kinds_of(stmt.op) if not (k == "out" and grad)]
            if kinds and _rarely(draw, 2):
                program = checked(respelled(program, b.name, i, draw(st.sampled_from(kinds)))) or program
    return program


def _fix_loops(program: Program) -> Program:
    """A loop over values needs a value to iterate over; otherwise count."""
    sections = tuple(
        replace(s, structure="for_range")
        if s.structure in ("for_values", "for_tuple") and not has_columns(program, s)
        else s
        for s in program.sections
    )
    return replace(program, sections=sections)


@st.composite
def _options(draw, program: Program) -> Options:
    fullgraph = not has_graph_breaks(program) and _rarely(draw)
    dynamic = True if _rarely(draw, 5) else None
    marks: list[tuple[str, int, bool]] = []
    if dynamic is None and _rarely(draw, 4):
        name, spec = program.inputs[0]
        if spec.shape and spec.shape[0] >= 2:
            marks.append((name, 0, strict_mark_holds(program)))
    return Options(fullgraph=fullgraph, dynamic=dynamic, mark_dynamic=tuple(marks))
