"""The op catalogue: one declarative entry per op.

An entry says how the op is written in Python (``fmt``, with ``{i}`` for the
i-th operand), what each operand slot accepts, and how the output shape follows
from the operands; a shape rule raises ``Reject`` for operands it cannot take.
Adding an op is adding one entry to ``OPS``. Choices are listed simplest first,
because Hypothesis shrinks towards the first alternative.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from .ir import Scalar, Shape


class Reject(ValueError):
    """These operands are not valid for this op; draw something else."""


@dataclass(frozen=True)
class T:
    """A tensor operand. The first one is the op's primary input; later ones
    must broadcast against it."""


@dataclass(frozen=True)
class W:
    """A fresh nn.Parameter whose shape follows from the primary input's."""

    shape: Callable[[Shape], Shape]
    scale: str = "fan_in"  # "fan_in": randn / sqrt(shape[-1]); "small": randn * 0.1


@dataclass(frozen=True)
class S:
    """A Python scalar; it may be a literal or a per-repeat block argument."""

    choices: Callable[[Shape], tuple[Scalar, ...]]


@dataclass(frozen=True)
class D:
    """A literal derived from the primary input's shape (never per-repeat)."""

    value: Callable[[Shape], Scalar]


Slot = Union[T, W, S, D]


@dataclass(frozen=True)
class OpSpec:
    name: str
    fmt: str
    slots: tuple[Slot, ...]
    # (tensor operand shapes, scalar/derived values in slot order) -> out shape
    shape: Callable[[list[Shape], list[Scalar]], Shape]
    differentiable: bool = True

    @property
    def tensor_slots(self) -> int:
        return sum(isinstance(s, T) for s in self.slots)


# --- shape rules -------------------------------------------------------------


def broadcast(a: Shape, b: Shape) -> Shape:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise Reject(f"cannot broadcast {a} with {b}")
        out.append(max(x, y))
    return tuple(reversed(out))


def _same(shapes: list[Shape], _: list[Scalar]) -> Shape:
    return shapes[0]


def _binary(shapes: list[Shape], _: list[Scalar]) -> Shape:
    out = broadcast(shapes[0], shapes[1])
    if out != shapes[0]:
        # Keep the primary's shape so chains stay shape-stable; broadcasting
        # the other way round is still exercised as the second operand.
        raise Reject("second operand would grow the result")
    return out


def _dim(shape: Shape, d: int) -> int:
    if not -len(shape) <= d < len(shape):
        raise Reject(f"dim {d} out of range for {shape}")
    return d % len(shape)


def _reduce_keepdim(shapes: list[Shape], scalars: list[Scalar]) -> Shape:
    shape, d = shapes[0], _dim(shapes[0], scalars[0])
    return shape[:d] + (1,) + shape[d + 1 :]


def _softmax(shapes: list[Shape], scalars: list[Scalar]) -> Shape:
    _dim(shapes[0], scalars[0])
    return shapes[0]


def _transpose(shapes: list[Shape], scalars: list[Scalar]) -> Shape:
    s = list(shapes[0])
    a, b = _dim(shapes[0], scalars[0]), _dim(shapes[0], scalars[1])
    s[a], s[b] = s[b], s[a]
    return tuple(s)


def _square_last(shapes: list[Shape], _: list[Scalar]) -> Shape:
    if not shapes[0]:
        raise Reject("needs at least one dim")
    return shapes[0]


def _flatten_leading(shapes: list[Shape], _: list[Scalar]) -> Shape:
    s = shapes[0]
    if len(s) < 2:
        raise Reject("nothing to flatten")
    n = 1
    for x in s[:-1]:
        n *= x
    return (n, s[-1])


def _dims(shape: Shape) -> tuple[int, ...]:
    return tuple(range(-1, -len(shape) - 1, -1))


_last = lambda s: s[-1] if s else 1  # noqa: E731
_unary = (T(),)

OPS: dict[str, OpSpec] = {
    op.name: op
    for op in [
        # pointwise unary
        OpSpec("sin", "torch.sin({0})", _unary, _same),
        OpSpec("cos", "torch.cos({0})", _unary, _same),
        OpSpec("tanh", "torch.tanh({0})", _unary, _same),
        OpSpec("sigmoid", "torch.sigmoid({0})", _unary, _same),
        OpSpec("neg", "-{0}", _unary, _same),
        # activations with keyword options
        OpSpec("relu", "F.relu({0})", _unary, _same),
        OpSpec("gelu", "F.gelu({0}, approximate={1})", (T(), S(lambda s: ("none", "tanh"))), _same),
        OpSpec(
            "leaky_relu",
            "F.leaky_relu({0}, negative_slope={1})",
            (T(), S(lambda s: (0.01, 0.2, 0.1))),
            _same,
        ),
        # binary with broadcasting and with Python scalars
        OpSpec("add", "{0} + {1}", (T(), T()), _binary),
        OpSpec("mul", "{0} * {1}", (T(), T()), _binary),
        OpSpec("sub", "{0} - {1}", (T(), T()), _binary),
        # a residual merge of any two values: what a chained block ends with
        OpSpec("add_mean", "{0} + {1}.mean()", (T(), T()), _same),
        OpSpec("mul_scalar", "{0} * {1}", (T(), S(lambda s: (2.0, 0.5, -1.0, 1.5))), _same),
        OpSpec("add_scalar", "{0} + {1}", (T(), S(lambda s: (1.0, 2, 0.5, -3))), _same),
        # matmul / linear against fresh weights
        OpSpec("matmul", "{0} @ {1}", (T(), W(lambda s: (_last(s), _last(s)))), _square_last),
        OpSpec(
            "linear",
            "F.linear({0}, {1}, {2})",
            (T(), W(lambda s: (_last(s), _last(s))), W(lambda s: (_last(s),), "small")),
            _square_last,
        ),
        # reductions
        OpSpec("sum", "{0}.sum(dim={1}, keepdim=True)", (T(), S(_dims)), _reduce_keepdim),
        OpSpec("mean", "{0}.mean(dim={1}, keepdim=True)", (T(), S(_dims)), _reduce_keepdim),
        # norm and softmax
        OpSpec("layer_norm", "F.layer_norm({0}, {1})", (T(), D(lambda s: (_last(s),))), _square_last),
        OpSpec("softmax", "torch.softmax({0}, dim={1})", (T(), S(_dims)), _softmax),
        # views
        OpSpec(
            "transpose",
            "{0}.transpose({1}, {2})",
            (T(), S(lambda s: (-1, -2) if len(s) > 1 else (-1,)), S(lambda s: (-2, -1) if len(s) > 1 else (-1,))),
            _transpose,
        ),
        OpSpec("flatten", "{0}.reshape({1})", (T(), D(lambda s: (-1, _last(s)))), _flatten_leading),
    ]
}


def render_call(op: OpSpec, operand_src: list[str]) -> str:
    return op.fmt.format(*operand_src)
