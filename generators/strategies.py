"""Hypothesis strategies for programs with repeated blocks.

Strategies only draw choices; Hypothesis's engine does the shrinking. So loops
are drawn as "keep going?" decisions (one iteration can be deleted), and every
``sampled_from`` lists the simplest alternative first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from .check import broadcasts_to, check, stmt_shape
from .ir import Arg, Block, Const, Program, Ref, Repeat, Scalar, Shape, Stmt, TensorSpec
from .ops import OPS, D, OpSpec, Reject, S, T, W

STRUCTURES_BY_KIND = {
    "function": ("for_values", "calls", "for_range"),
    "module": ("module_list", "calls", "for_values", "for_range"),
}
MAX_DIM = 5


def _likely(draw, odds: int = 3) -> bool:
    """A "keep going?" decision that says yes ``odds`` times in ``odds + 1``;
    it shrinks to no, so the shrinker can delete one iteration at a time."""
    return draw(st.integers(0, odds)) > 0


@dataclass
class _BlockBuilder:
    """Mutable state while drawing one block: shapes are tracked per repeat."""

    repeats: int
    per_repeat_args: bool
    scope: dict[str, list[Shape]] = field(default_factory=dict)
    tensors: list[str] = field(default_factory=list)  # values ops may read
    weights: list[tuple[str, TensorSpec]] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    arg_rows: list[list[Scalar]] = field(default_factory=list)  # per arg, per repeat
    body: list[Stmt] = field(default_factory=list)

    def rows(self) -> list[dict[str, Scalar]]:
        return [{a: self.arg_rows[j][i] for j, a in enumerate(self.args)} for i in range(self.repeats)]


def _agreed(values: list) -> object:
    first = values[0]
    if any(v != first for v in values[1:]):
        raise Reject("differs between repeats")
    return first


def _draw_operands(draw, b: _BlockBuilder, op: OpSpec) -> tuple[list, list, list]:
    """Operands for ``op``, plus the weights and args they would add."""
    primary = draw(st.sampled_from(b.tensors[::-1]))  # latest value first: chains shrink well
    primary_shapes = b.scope[primary]
    operands: list = [Ref(primary)]
    new_weights: list[tuple[str, TensorSpec]] = []
    new_args: list[tuple[str, list[Scalar]]] = []
    for slot in op.slots[1:]:
        if isinstance(slot, T):
            fits = [n for n in b.tensors[::-1] if all(broadcasts_to(s, p) for s, p in zip(b.scope[n], primary_shapes))]
            others = [n for n in b.tensors[::-1] if n not in fits]
            operands.append(Ref(draw(st.sampled_from(fits + others))))
        elif isinstance(slot, W):
            name = f"w{len(b.weights) + len(new_weights)}"
            shape = _agreed([slot.shape(s) for s in primary_shapes])
            new_weights.append((name, TensorSpec(shape, "float32", True)))
            operands.append(Ref(name))
        elif isinstance(slot, D):
            operands.append(Const(_agreed([slot.value(s) for s in primary_shapes])))
        elif isinstance(slot, S):
            choices = _agreed([slot.choices(s) for s in primary_shapes])
            if b.per_repeat_args and _likely(draw, 2):
                name = f"s{len(b.args) + len(new_args)}"
                new_args.append((name, [draw(st.sampled_from(choices)) for _ in range(b.repeats)]))
                operands.append(Arg(name))
            else:
                operands.append(Const(draw(st.sampled_from(choices))))
    return operands, new_weights, new_args


def _try_stmt(draw, b: _BlockBuilder, op: OpSpec) -> bool:
    try:
        operands, new_weights, new_args = _draw_operands(draw, b, op)
    except Reject:
        return False
    out = f"v{len(b.body)}"
    stmt = Stmt(out, op.name, tuple(operands))
    weight_shapes = {n: spec.shape for n, spec in new_weights}
    arg_values = dict(new_args)
    try:
        shapes = []
        for i, row in enumerate(b.rows()):
            scope = {n: s[i] for n, s in b.scope.items()} | weight_shapes
            shapes.append(stmt_shape(op, stmt, scope, row | {a: v[i] for a, v in arg_values.items()}))
    except Reject:
        return False
    b.body.append(stmt)
    b.scope[out] = shapes
    b.tensors.append(out)
    for name, spec in new_weights:
        b.weights.append((name, spec))
        b.scope[name] = [spec.shape] * b.repeats
    for name, values in new_args:
        b.args.append(name)
        b.arg_rows.append(values)
    return True


def _close_chain(b: _BlockBuilder, carried: str) -> None:
    """Make the block's result the carried input's shape (a residual merge)."""
    last = b.body[-1].out
    if b.scope[last] == b.scope[carried]:
        return
    fits = all(broadcasts_to(s, c) for s, c in zip(b.scope[last], b.scope[carried]))
    op = "add" if fits else "add_mean"
    out = f"v{len(b.body)}"
    b.body.append(Stmt(out, op, (Ref(carried), Ref(last))))
    b.scope[out] = list(b.scope[carried])


@st.composite
def shapes(draw, max_rank: int = 3) -> Shape:
    rank = draw(st.integers(1, max_rank))
    return tuple(draw(st.integers(1, MAX_DIM)) for _ in range(rank))


@st.composite
def broadcastable_to(draw, shape: Shape) -> Shape:
    """A shape that broadcasts to ``shape``: a suffix with some dims set to 1."""
    keep = draw(st.integers(1, len(shape)))
    return tuple(1 if draw(st.booleans()) else d for d in shape[-keep:])


@st.composite
def programs(draw, max_stmts: int = 8, max_repeats: int = 4, ops: tuple[str, ...] | None = None) -> Program:
    """A valid program: one block, repeated at least twice."""
    op_list = [OPS[name] for name in (ops or tuple(OPS))]
    kind = draw(st.sampled_from(("function", "module")))
    structure = draw(st.sampled_from(STRUCTURES_BY_KIND[kind]))
    flow = draw(st.sampled_from(("chain", "fanout")))

    main = draw(shapes())
    inputs = [("x", TensorSpec(main, "float32", draw(st.booleans())))]
    while len(inputs) < 3 and draw(st.booleans()):
        inputs.append((f"y{len(inputs) - 1}", TensorSpec(draw(broadcastable_to(main)), "float32", draw(st.booleans()))))

    repeats = 2
    while repeats < max_repeats and draw(st.booleans()):
        repeats += 1

    b = _BlockBuilder(repeats, per_repeat_args=structure != "for_range")
    for name, spec in inputs:
        b.scope[name] = [spec.shape] * repeats
        b.tensors.append(name)
    attempts = 0
    while attempts < 4 * max_stmts and len(b.body) < max_stmts and (len(b.body) < 2 or _likely(draw)):
        attempts += 1
        _try_stmt(draw, b, draw(st.sampled_from(op_list)))
    if not b.body:
        b.body.append(Stmt("v0", "neg", (Ref("x"),)))
        b.scope["v0"] = list(b.scope["x"])
    if flow == "chain":
        _close_chain(b, "x")

    program = Program(
        inputs=tuple(inputs),
        block=Block(
            kind=kind,
            inputs=tuple(n for n, _ in inputs),
            weights=tuple(b.weights),
            args=tuple(b.args),
            body=tuple(b.body),
            result=b.body[-1].out,
        ),
        repeat=Repeat(
            structure=structure,
            flow=flow,
            args=tuple(tuple(b.arg_rows[j][i] for j in range(len(b.args))) for i in range(repeats)),
        ),
        seed=draw(st.integers(0, 2**16)),
    )
    check(program)  # valid by construction; a failure here is a generator bug
    return program
