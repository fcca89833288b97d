"""The op catalogue: one declarative entry per op.

An entry says how the op is written in Python (``fmt``, with ``{i}`` for the
i-th operand; a template with ``{out}`` is a statement, anything else an
expression assigned to the output), what each operand slot accepts, and how
the output's static type follows from the operands and the ambient state
(``rule``); a rule raises ``Reject`` for operands it cannot take. The flags say
what validity depends on: autograd (``saves_output``/``saves_inputs``),
aliasing (``view``, ``inplace``), randomness and autocast. Adding an op is
adding one entry to ``OPS``. Choices are listed simplest first, because
Hypothesis shrinks towards the first alternative.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Callable, Union

from .values import FLOATS, NAN, DType, Fn, PyList, PySlice, Shape, Sub, Value, typed_key


class Reject(ValueError):
    """These operands are not valid for this op; draw something else."""


@dataclass(frozen=True)
class TT:
    """A value's static type: what validity and the next op's rule depend on."""

    shape: Shape
    dtype: str = "float32"
    contiguous: bool = True


@dataclass(frozen=True)
class Env:
    """The ambient state a repeat runs under, as far as types are concerned."""

    default_dtype: str = "float32"
    autocast: bool = False


@dataclass(frozen=True)
class T:
    """A tensor operand. The first one is the op's primary input; a later one
    must ``broadcast`` to the primary's shape, have the ``same`` shape, or
    have ``any`` shape."""

    dtypes: tuple[str, ...] = FLOATS
    relation: str = "broadcast"


@dataclass(frozen=True)
class W:
    """A fresh nn.Parameter (or buffer) whose shape follows from the primary's."""

    shape: Callable[[Shape], Shape]
    init: str = "fan_in"  # see WEIGHT_INITS
    buffer: bool = False


@dataclass(frozen=True)
class S:
    """A Python value; it may be a literal or a per-repeat block argument.
    ``edges`` says which edge values (EDGES) the op also takes: "float",
    "number" (floats and ints), or none."""

    choices: Callable[[TT], tuple[Value, ...]]
    edges: str = ""


# Numbers at the edges of equality and precision, simplest first: signed
# zeros, NaN, infinities, subnormal and huge floats, ints beyond 32 bits, and
# values equal under ``==`` but of other types.
EDGES: dict[str, tuple[Value, ...]] = {
    "float": (-0.0, 0.0, NAN, float("inf"), float("-inf"), 1e-40, 5e-324, 1e30),
    "number": (-0.0, 0.0, NAN, float("inf"), float("-inf"), 1e-40, 5e-324, 1e30,
               2**33 + 1, -(2**40), 1, 1.0, True, 0, False),
    # a Python bool minus a tensor is an error in eager (torch refuses bool subtraction)
    "subtrahend": (-0.0, 0.0, NAN, float("inf"), float("-inf"), 1e-40, 5e-324, 1e30, 2**33 + 1, -(2**40), 1, 1.0, 0),
}
_HALF_MAX = 65504.0


def edge_values(slot: "S", t: "TT") -> tuple[Value, ...]:
    """The edge values ``slot`` takes for a primary of type ``t`` (finite
    values beyond float16's range are left out for float16 primaries: a fill
    there is an error, not an edge)."""
    found = EDGES.get(slot.edges, ())
    if t.dtype == "float16":
        found = tuple(v for v in found if not (isinstance(v, (int, float)) and v == v and _HALF_MAX < abs(v) < float("inf")))
    return found


def slot_values(slot: "S", t: "TT") -> tuple[Value, ...]:
    """Everything ``slot`` accepts: its choices, then its edge values."""
    base = slot.choices(t)
    keys = {repr(typed_key(v)) for v in base}
    return base + tuple(v for v in edge_values(slot, t) if repr(typed_key(v)) not in keys)


def accepts(slot: "S", t: "TT", value: Value) -> bool:
    """Membership by identity of computation: -0.0 is not 0.0, NaN is NaN;
    an int or float subclass instance goes where its base value goes."""
    if isinstance(value, Sub):
        return accepts(slot, t, value.value)
    return repr(typed_key(value)) in {repr(typed_key(v)) for v in slot_values(slot, t)}


@dataclass(frozen=True)
class D:
    """A literal derived from the primary's shape (never per-repeat)."""

    value: Callable[[Shape], Value]


Slot = Union[T, W, S, D]
Rule = Callable[[list[TT], list[Value], Env], TT]

WEIGHT_INITS = {
    "fan_in": "torch.randn({shape}) / {fan_in} ** 0.5",
    "small": "torch.randn({shape}) * 0.1",
    "ones": "torch.ones({shape})",
    "zeros": "torch.zeros({shape})",
}


@dataclass(frozen=True)
class OpSpec:
    name: str
    category: str
    fmt: str
    slots: tuple[Slot, ...]
    rule: Rule
    dtypes: tuple[str, ...] = FLOATS  # accepted by the primary operand
    differentiable: bool = True
    inplace: bool = False  # mutates its primary operand
    view: bool = False  # the output aliases the primary operand
    # eager may hand back the primary operand itself though the schema promises a new tensor
    # (at::dropout with p=0): compiled code, which follows the schema, need not alias it
    eager_alias: bool = False
    random: bool = False
    saves_output: bool = False  # autograd keeps the output: it must not be mutated later
    saves_inputs: bool = True  # autograd keeps the inputs: they must not be mutated later
    autocast: bool = False  # runs in bfloat16 under CPU autocast
    same_dtype: bool = False  # tensor operands must share a dtype (no promotion)
    weight_dtypes: tuple[str, ...] = ("float32",)  # primary dtypes allowed next to weights

    @property
    def statement(self) -> bool:
        return "{out}" in self.fmt

    @property
    def element(self) -> bool:
        """Takes one element of the tuple an op returns (chunk(...)[-1]): a getitem after a multi-output node."""
        return ")[" in self.fmt

    @property
    def shape_literals(self) -> bool:
        """Writes the primary's sizes into the source (specializes dynamic dims)."""
        return any(isinstance(s, D) for s in self.slots)


# --- type rules ----------------------------------------------------------------

_ORDER = {"bool": 0, "int64": 1, "float16": 2, "bfloat16": 2, "float32": 3, "float64": 4}


def promote(a: str, b: str) -> str:
    if a == b:
        return a
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"
    return a if _ORDER[a] > _ORDER[b] else b


def promote_scalar(dtype: str, value: Value, env: Env) -> str:
    if isinstance(value, float) and dtype in ("bool", "int64"):
        return env.default_dtype
    if isinstance(value, int) and not isinstance(value, bool) and dtype == "bool":
        return "int64"
    return dtype


def broadcast(a: Shape, b: Shape) -> Shape:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise Reject(f"cannot broadcast {a} with {b}")
        out.append(max(x, y))
    return tuple(reversed(out))


def _dim(shape: Shape, d: int) -> int:
    if not -len(shape) <= d < len(shape):
        raise Reject(f"dim {d} out of range for {shape}")
    return d % len(shape)


def _rank(lo: int, hi: int = 8) -> Callable[[Shape], None]:
    def check(shape: Shape) -> None:
        if not lo <= len(shape) <= hi:
            raise Reject(f"needs rank {lo}..{hi}, got {shape}")

    return check


def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def same(t: list[TT], v: list[Value], e: Env) -> TT:
    return t[0]


def _binary(t: list[TT], v: list[Value], e: Env) -> TT:
    shape = broadcast(t[0].shape, t[1].shape)
    if shape != t[0].shape:
        raise Reject("second operand would grow the result")
    return TT(shape, promote(t[0].dtype, t[1].dtype), t[0].contiguous and t[1].contiguous)


def _where(t: list[TT], v: list[Value], e: Env) -> TT:
    for other in t[1:]:
        if broadcast(t[0].shape, other.shape) != t[0].shape:
            raise Reject("where operand would grow the result")
    return TT(t[0].shape, promote(t[0].dtype, t[2].dtype), False)


def _scalar(t: list[TT], v: list[Value], e: Env) -> TT:
    return TT(t[0].shape, promote_scalar(t[0].dtype, v[0], e), t[0].contiguous)


def _dtype(dtype: str, contiguous: bool = True) -> Rule:
    return lambda t, v, e: TT(t[0].shape, dtype, contiguous and t[0].contiguous)


def _compare(t: list[TT], v: list[Value], e: Env) -> TT:
    shape = broadcast(t[0].shape, t[1].shape) if len(t) > 1 else t[0].shape
    if shape != t[0].shape:
        raise Reject("comparison would grow the result")
    return TT(shape, "bool", t[0].contiguous)


def _clamp(t: list[TT], v: list[Value], e: Env) -> TT:
    lo, hi = v
    if lo is None and hi is None:
        raise Reject("clamp needs min or max")
    if lo is not None and hi is not None and lo > hi:
        raise Reject("clamp min > max")
    return t[0]


def _reduce(keep: bool | None = None, dtype: str | None = None) -> Rule:
    """dim in v[0]; keepdim in v[1] unless ``keep`` fixes it."""

    def rule(t: list[TT], v: list[Value], e: Env) -> TT:
        shape = t[0].shape
        dims = tuple(range(len(shape))) if v[0] is None else v[0]
        dims = dims.items if isinstance(dims, PyList) else dims if isinstance(dims, tuple) else (dims,)
        idx = {_dim(shape, d) for d in dims}
        if len(idx) != len(dims):
            raise Reject("repeated reduction dim")
        keepdim = keep if keep is not None else v[1]
        if keepdim:
            out = tuple(1 if i in idx else s for i, s in enumerate(shape))
        else:
            out = tuple(s for i, s in enumerate(shape) if i not in idx)
        return TT(out, dtype or t[0].dtype, t[0].contiguous)

    return rule


def _reduce_all(t: list[TT], v: list[Value], e: Env) -> TT:
    return TT((), t[0].dtype)


def _with_rank(lo: int, rule: Rule = same, hi: int = 8) -> Rule:
    check = _rank(lo, hi)

    def wrapped(t: list[TT], v: list[Value], e: Env) -> TT:
        check(t[0].shape)
        return rule(t, v, e)

    return wrapped


def _check_dim(t: list[TT], v: list[Value], e: Env) -> TT:
    _dim(t[0].shape, v[0])
    return t[0]


def _matmul_t(t: list[TT], v: list[Value], e: Env) -> TT:
    a, b = t[0].shape, t[1].shape
    if len(a) < 2 or a != b:
        raise Reject("matmul_t needs two equal shapes of rank >= 2")
    return TT(a[:-1] + (a[-2],), promote(t[0].dtype, t[1].dtype))


def _contiguous(t: list[TT], v: list[Value], e: Env) -> TT:
    return TT(t[0].shape, t[0].dtype, True)


def _fresh(rule: Rule) -> Rule:
    """The op allocates a contiguous output (matmul, conv) whatever came in."""

    def wrapped(t: list[TT], v: list[Value], e: Env) -> TT:
        out = rule(t, v, e)
        return TT(out.shape, out.dtype, True)

    return wrapped


def _batch_norm(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    if len(s) < 2 or _numel(s) // s[1] < 2:
        raise Reject("batch_norm in training needs more than one value per channel")
    return t[0]


def _group_norm(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    if len(s) < 2 or s[1] % v[0] or _numel(s[1:]) // v[0] < 2:
        raise Reject("group_norm needs channels divisible by groups, and more than one value per group")
    return t[0]


def _join(stack: bool) -> Rule:
    def rule(t: list[TT], v: list[Value], e: Env) -> TT:
        a, b = t[0].shape, t[1].shape
        if a != b:
            raise Reject("cat/stack operands must have equal shapes here")
        dtype = promote(t[0].dtype, t[1].dtype)
        if stack:
            d = v[0] % (len(a) + 1) if -len(a) - 1 <= v[0] <= len(a) else None
            if d is None:
                raise Reject("stack dim out of range")
            return TT(a[:d] + (2,) + a[d:], dtype)
        d = _dim(a, v[0])
        return TT(a[:d] + (2 * a[d],) + a[d + 1 :], dtype)

    return rule


def _split(t: list[TT], v: list[Value], e: Env) -> TT:
    s, size = t[0].shape, v[0]
    d = _dim(s, v[1])
    return TT(s[:d] + (min(size, s[d]),) + s[d + 1 :], t[0].dtype, d == 0 and t[0].contiguous)


def _chunk(t: list[TT], v: list[Value], e: Env) -> TT:
    s, n = t[0].shape, v[0]
    d = _dim(s, v[1])
    per = -(-s[d] // n)
    last = s[d] - per * (-(-s[d] // per) - 1)
    return TT(s[:d] + (last,) + s[d + 1 :], t[0].dtype, d == 0 and t[0].contiguous)


def _unbind(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    d = _dim(s, v[0])
    return TT(s[:d] + s[d + 1 :], t[0].dtype, d == 0 and t[0].contiguous)


def _slice_len(n: int, sl: PySlice) -> int:
    return len(range(n)[slice(sl.start, sl.stop, sl.step)])


def _index_int(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    if not s or not -s[0] <= v[0] < s[0]:
        raise Reject("index out of range")
    return TT(s[1:], t[0].dtype, t[0].contiguous)


def _index_slice(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    if not s or _slice_len(s[0], v[0]) == 0:
        raise Reject("empty slice")
    return TT((_slice_len(s[0], v[0]),) + s[1:], t[0].dtype, False)


def _last_slice(sl: PySlice) -> Rule:
    def rule(t: list[TT], v: list[Value], e: Env) -> TT:
        s = t[0].shape
        if not s or _slice_len(s[-1], sl) == 0:
            raise Reject("empty slice")
        return TT(s[:-1] + (_slice_len(s[-1], sl),), t[0].dtype, False)

    return rule


def _last_slice_arg(t: list[TT], v: list[Value], e: Env) -> TT:
    return _last_slice(v[0])(t, v, e)


def _advanced(t: list[TT], v: list[Value], e: Env) -> TT:
    s, idx = t[0].shape, v[0].items
    if not s or any(not -s[0] <= i < s[0] for i in idx):
        raise Reject("index out of range")
    return TT((len(idx),) + s[1:], t[0].dtype, True)


def _narrow(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    d = _dim(s, v[0])
    return TT(s[:d] + (1,) + s[d + 1 :], t[0].dtype, d == 0 and t[0].contiguous)


def _reshape_to(value_index: int, needs_contiguous: bool = False) -> Rule:
    def rule(t: list[TT], v: list[Value], e: Env) -> TT:
        if needs_contiguous and not t[0].contiguous:
            raise Reject("view needs a contiguous tensor")
        target = list(v[value_index])
        known = _numel(tuple(d for d in target if d != -1))
        if -1 in target:
            target[target.index(-1)] = _numel(t[0].shape) // max(known, 1)
        if _numel(tuple(target)) != _numel(t[0].shape):
            raise Reject("reshape changes the number of elements")
        return TT(tuple(target), t[0].dtype, t[0].contiguous)

    return rule


def _transpose(t: list[TT], v: list[Value], e: Env) -> TT:
    s = list(t[0].shape)
    a, b = _dim(t[0].shape, v[0]), _dim(t[0].shape, v[1])
    s[a], s[b] = s[b], s[a]
    return TT(tuple(s), t[0].dtype, a == b and t[0].contiguous)


def _permute(t: list[TT], v: list[Value], e: Env) -> TT:
    s, p = t[0].shape, v[0]
    if len(p) != len(s):
        raise Reject("permutation rank")
    return TT(tuple(s[i] for i in p), t[0].dtype, list(p) == sorted(p) and t[0].contiguous)


def _expand(t: list[TT], v: list[Value], e: Env) -> TT:
    return TT(tuple(v[0]), t[0].dtype, False)


def _unsqueeze(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    d = v[0] % (len(s) + 1) if -len(s) - 1 <= v[0] <= len(s) else None
    if d is None:
        raise Reject("unsqueeze dim out of range")
    return TT(s[:d] + (1,) + s[d:], t[0].dtype, t[0].contiguous)


def _squeeze(t: list[TT], v: list[Value], e: Env) -> TT:
    s = t[0].shape
    d = _dim(s, v[0])
    return TT(s[:d] + s[d + 1 :] if s[d] == 1 else s, t[0].dtype, t[0].contiguous)


def _movedim(t: list[TT], v: list[Value], e: Env) -> TT:
    s = list(t[0].shape)
    a, b = _dim(t[0].shape, v[0]), _dim(t[0].shape, v[1])
    s.insert(b, s.pop(a))
    return TT(tuple(s), t[0].dtype, a == b and t[0].contiguous)


def _to(t: list[TT], v: list[Value], e: Env) -> TT:
    return TT(t[0].shape, v[0].name, t[0].contiguous)


def _type_as(t: list[TT], v: list[Value], e: Env) -> TT:
    return TT(t[0].shape, t[1].dtype, t[0].contiguous)


def _factory_add(t: list[TT], v: list[Value], e: Env) -> TT:
    """x + <factory tensor of the default dtype>."""
    return TT(t[0].shape, promote(t[0].dtype, e.default_dtype), t[0].contiguous)


def _merge_add(t: list[TT], v: list[Value], e: Env) -> TT:
    if broadcast(t[0].shape, t[1].shape) != t[0].shape:
        raise Reject("merge operand would grow the carried value")
    return t[0]


def _merge_same(t: list[TT], v: list[Value], e: Env) -> TT:
    if t[1].dtype != t[0].dtype:
        raise Reject("merge_add needs the carried dtype")
    return _merge_add(t, v, e)


def _inplace(rule: Rule) -> Rule:
    """In place: the result keeps the primary's shape and dtype, or is invalid."""

    def wrapped(t: list[TT], v: list[Value], e: Env) -> TT:
        out = rule(t, v, e)
        if out.shape != t[0].shape:
            raise Reject("in-place result must keep the target's shape")
        if out.dtype != t[0].dtype and promote(out.dtype, t[0].dtype) != t[0].dtype:
            raise Reject(f"cannot write {out.dtype} into {t[0].dtype} in place")
        return t[0]

    return wrapped


# --- choice helpers ----------------------------------------------------------------


def _last(s: Shape) -> int:
    return s[-1] if s else 1


def _dims(t: TT) -> tuple[int, ...]:
    return tuple(range(-1, -len(t.shape) - 1, -1))


def _dims_or_all(t: TT) -> tuple[Value, ...]:
    """Reduction dims, and None for "all of them"."""
    return _dims(t) + (None,)


def _dims_and_new(t: TT) -> tuple[int, ...]:
    return tuple(range(-1, -len(t.shape) - 2, -1))


def _perms(t: TT) -> tuple[Value, ...]:
    rank = len(t.shape)
    return tuple(p for p in permutations(range(rank)) if rank <= 4)[1:] or ((0,),)


def _groups(t: TT) -> tuple[Value, ...]:
    c = t.shape[1] if len(t.shape) > 1 else 1
    return tuple(g for g in (1, 2, 3, 4, 5) if c % g == 0)


def _merge_last_two(s: Shape) -> Value:
    return s[:-2] + (s[-2] * s[-1],) if len(s) >= 2 else (_numel(s),)


# Ops whose result jumps when an operand moves by rounding noise (a
# comparison near equality, a sign near zero, a reciprocal near zero, an
# index of a maximum, a count of nonzeros): judged by tolerance only where
# both sides compute at one precision. A backend computing at a lower one
# (harness.backend_capabilities) is not given programs with them.
ROUNDING_SENSITIVE = frozenset({
    "gt", "lt_scalar", "logical_not", "where", "masked_fill", "argmax", "copysign_t", "reciprocal", "div_raw",
    "signbit", "atan2", "nonzero_count", "masked_select_sum", "to_dtype",
})
_ANY = ("float32", "float64", "bfloat16", "float16", "int64", "bool")
# Unary functions and tensor methods that map a floating tensor to one of its
# type: what ``apply`` calls, and what a closure may capture.
CALLABLES = (Fn("torch.sin"), Fn("torch.tanh"), Fn("torch.Tensor.neg"), Fn("torch.cos"), Fn("torch.Tensor.abs"),
             Fn("torch.sigmoid"))
_EXACT = ("float32", "float64")  # for ops whose result jumps with rounding noise
_u = (T(),)
_bin = (T(), T())
_keep = lambda t: (True, False)  # noqa: E731


def _typed_by_body(t: list[TT], v: list[Value], e: Env) -> TT:
    raise Reject("a sub-block call is typed by the sub-block's body")


def _typed_by_operands(t: list[TT], v: list[Value], e: Env) -> TT:
    raise Reject("an OpInfo case is typed by the type its operands record")


def _op(name: str, category: str, fmt: str, slots=_u, rule: Rule = same, **flags) -> OpSpec:
    return OpSpec(name, category, fmt, tuple(slots), rule, **flags)


_ENTRIES = [
    # pointwise unary
    _op("sin", "unary", "torch.sin({0})"),
    _op("cos", "unary", "torch.cos({0})"),
    _op("tanh", "unary", "torch.tanh({0})", saves_output=True),
    _op("sigmoid", "unary", "torch.sigmoid({0})", saves_output=True),
    _op("neg", "unary", "-{0}", saves_inputs=False),
    _op("abs", "unary", "torch.abs({0})"),
    _op("erf", "unary", "torch.erf({0})"),
    _op("atan", "unary", "torch.atan({0})"),
    _op("square", "unary", "torch.square({0})"),
    _op("log1p_abs", "unary", "torch.log1p({0}.abs())"),
    _op("rsqrt_abs", "unary", "torch.rsqrt({0}.abs() + 1)", saves_output=True),
    _op("exp_neg_abs", "unary", "torch.exp(-{0}.abs())", saves_output=True),
    _op("clone", "unary", "{0}.clone()", saves_inputs=False, dtypes=_ANY),
    # activations with their keyword options
    _op("relu", "activation", "F.relu({0})", saves_output=True),
    _op("gelu", "activation", "F.gelu({0}, approximate={1})", (T(), S(lambda t: ("none", "tanh")))),
    _op("leaky_relu", "activation", "F.leaky_relu({0}, negative_slope={1})",
        (T(), S(lambda t: (0.01, 0.2, 0.1), "float"))),
    _op("elu", "activation", "F.elu({0}, alpha={1})", (T(), S(lambda t: (1.0, 0.5, 2.0))), saves_output=True),
    _op("celu", "activation", "F.celu({0}, alpha={1})", (T(), S(lambda t: (1.0, 0.5))), saves_output=True),
    _op("selu", "activation", "F.selu({0})", saves_output=True),
    _op("softplus", "activation", "F.softplus({0}, beta={1})", (T(), S(lambda t: (1.0, 2.0, 0.5)))),
    _op("hardtanh", "activation", "F.hardtanh({0}, min_val={1}, max_val={2})",
        (T(), S(lambda t: (-1.0, -0.5, -2.0)), S(lambda t: (1.0, 0.5, 2.0)))),
    _op("silu", "activation", "F.silu({0})"),
    _op("mish", "activation", "F.mish({0})"),
    _op("hardswish", "activation", "F.hardswish({0})"),
    _op("relu6", "activation", "F.relu6({0})"),
    # binary with broadcasting
    _op("add", "binary", "{0} + {1}", _bin, _binary, saves_inputs=False),
    _op("sub", "binary", "{0} - {1}", _bin, _binary, saves_inputs=False),
    _op("mul", "binary", "{0} * {1}", _bin, _binary),
    _op("div", "binary", "{0} / ({1}.abs() + 1)", _bin, _binary),
    _op("maximum", "binary", "torch.maximum({0}, {1})", _bin, _binary),
    _op("minimum", "binary", "torch.minimum({0}, {1})", _bin, _binary),
    _op("atan2", "binary", "torch.atan2({0}, {1})", _bin, _binary),
    _op("add_alpha", "binary", "torch.add({0}, {1}, alpha={2})", (T(), T(), S(lambda t: (2, 0.5, -1))), _binary,
        saves_inputs=False),
    _op("lerp", "binary", "torch.lerp({0}, {1}, {2})", (T(), T(relation="same"), S(lambda t: (0.5, 0.25, 0.9))),
        _binary, same_dtype=True),
    # Python scalars
    _op("mul_scalar", "scalar", "{0} * {1}", (T(), S(lambda t: (2.0, 0.5, -1.0, 1.5, 3, True), "number")), _scalar),
    _op("add_scalar", "scalar", "{0} + {1}", (T(), S(lambda t: (1.0, 2, 0.5, -3), "number")), _scalar,
        saves_inputs=False),
    _op("rsub_scalar", "scalar", "{1} - {0}", (T(), S(lambda t: (1.0, 2, -0.5), "subtrahend")), _scalar,
        saves_inputs=False),
    _op("div_scalar", "scalar", "{0} / {1}", (T(), S(lambda t: (2.0, 4, -0.5), "number")), _scalar),
    _op("pow_scalar", "scalar", "{0}.abs().pow({1})", (T(), S(lambda t: (2, 3, 1.5)))),
    _op("clamp", "scalar", "{0}.clamp(min={1}, max={2})",
        (T(), S(lambda t: (None, -1.0, -0.5)), S(lambda t: (None, 1.0, 2.0))), _clamp),
    # comparisons and where
    _op("gt", "compare", "{0} > {1}", _bin, _compare, differentiable=False),
    _op("lt_scalar", "compare", "{0} < {1}", (T(), S(lambda t: (0.0, 0.5, -1), "number")), _compare,
        differentiable=False),
    _op("logical_not", "compare", "torch.logical_not({0} > 0)", _u, _compare, differentiable=False),
    _op("where", "compare", "torch.where({1} > 0, {0}, {2})", _bin + (T(),), _where),
    _op("masked_fill", "compare", "{0}.masked_fill({0} > {1}, {2})",
        (T(), S(lambda t: (0.0, 0.5)), S(lambda t: (0.0, -1.0, 1.0), "float"))),
    # reductions with dim and keepdim
    _op("sum", "reduce", "{0}.sum(dim={1}, keepdim={2})", (T(), S(_dims_or_all), S(_keep)), _reduce(),
        saves_inputs=False),
    _op("mean", "reduce", "{0}.mean(dim={1}, keepdim={2})", (T(), S(_dims_or_all), S(_keep)), _reduce(),
        saves_inputs=False),
    _op("mean_dims", "reduce", "{0}.mean(dim={1})",
        (T(), S(lambda t: ((-1,), PyList((-1,)), (0, -1), PyList((0, -1)))[: 4 if len(t.shape) > 1 else 2])),
        _reduce(keep=False), saves_inputs=False),
    _op("amax", "reduce", "{0}.amax(dim={1}, keepdim={2})", (T(), S(_dims), S(_keep)), _reduce(), saves_output=True),
    _op("amin", "reduce", "{0}.amin(dim={1}, keepdim={2})", (T(), S(_dims), S(_keep)), _reduce(), saves_output=True),
    _op("var", "reduce", "{0}.var(dim={1}, keepdim={2}, correction=0)", (T(), S(_dims), S(_keep)), _reduce()),
    _op("logsumexp", "reduce", "torch.logsumexp({0}, dim={1}, keepdim={2})", (T(), S(_dims), S(_keep)), _reduce(),
        saves_output=True),
    _op("norm", "reduce", "torch.linalg.vector_norm({0}, dim={1}, keepdim={2})", (T(), S(_dims_or_all), S(_keep)),
        _reduce(), saves_output=True),
    _op("sum_all", "reduce", "{0}.sum()", _u, _reduce_all, saves_inputs=False),
    _op("argmax", "reduce", "{0}.argmax(dim={1}, keepdim={2})", (T(), S(_dims), S(_keep)), _reduce(dtype="int64"),
        dtypes=_EXACT, differentiable=False),
    # matmul, bmm, linear, convolutions against fresh weights
    _op("matmul", "linalg", "{0} @ {1}", (T(), W(lambda s: (_last(s), _last(s)))), _fresh(_with_rank(1)),
        autocast=True),
    _op("matmul_t", "linalg", "{0} @ {1}.transpose(-1, -2)", (T(), T(relation="same")), _fresh(_matmul_t),
        autocast=True, same_dtype=True),
    # any rank >= 2, folded to the (batch, m, k) bmm needs and back
    _op("bmm", "linalg", "torch.bmm({0}.reshape({1}), {2}).reshape({3})",
        (T(), D(lambda s: (-1,) + s[-2:]), W(lambda s: (_numel(s[:-2]), s[-1], s[-1])), D(lambda s: s)),
        _fresh(_with_rank(2)), autocast=True),
    _op("linear", "linalg", "F.linear({0}, {1}, {2})",
        (T(), W(lambda s: (_last(s), _last(s))), W(lambda s: (_last(s),), "small")), _fresh(_with_rank(1)),
        autocast=True),
    _op("einsum", "linalg", "torch.einsum({1}, {0}, {2})",
        (T(), S(lambda t: ("...i,ij->...j", "...i,ji->...j")), W(lambda s: (_last(s), _last(s)))),
        _fresh(_with_rank(1)), autocast=True),
    # batched (N, C, L) / (N, C, H, W) or unbatched (C, L) / (C, H, W) input
    _op("conv1d", "linalg", "F.conv1d({0}, {1}, padding=1)",
        (T(), W(lambda s: (s[-2], s[-2], 3) if len(s) >= 2 else (1,))), _fresh(_with_rank(2, hi=3)), autocast=True),
    _op("conv2d", "linalg", "F.conv2d({0}, {1}, padding=1)",
        (T(), W(lambda s: (s[-3], s[-3], 3, 3) if len(s) >= 3 else (1,))), _fresh(_with_rank(3, hi=4)),
        autocast=True),
    # norms
    _op("layer_norm", "norm", "F.layer_norm({0}, {1})", (T(), D(lambda s: (_last(s),))), _with_rank(1)),
    _op("layer_norm_affine", "norm", "F.layer_norm({0}, {1}, {2}, {3})",
        (T(), D(lambda s: (_last(s),)), W(lambda s: (_last(s),), "ones"), W(lambda s: (_last(s),), "small")),
        _with_rank(1), weight_dtypes=("float32", "bfloat16")),
    _op("rms_norm", "norm", "F.rms_norm({0}, {1})", (T(), D(lambda s: (_last(s),))), _with_rank(1)),
    _op("batch_norm", "norm", "F.batch_norm({0}, {1}, {2}, training=True, momentum=0.1)",
        (T(), W(lambda s: (s[1] if len(s) > 1 else 1,), "zeros", buffer=True),
         W(lambda s: (s[1] if len(s) > 1 else 1,), "ones", buffer=True)), _batch_norm),
    _op("group_norm", "norm", "F.group_norm({0}, {1})", (T(), S(_groups)), _group_norm),
    _op("softmax", "softmax", "torch.softmax({0}, dim={1})", (T(), S(_dims)), _check_dim, saves_output=True),
    _op("log_softmax", "softmax", "torch.log_softmax({0}, dim={1})", (T(), S(_dims)), _check_dim,
        saves_output=True),
    # computed in float32 and cast back to the input's dtype, as attention and
    # LLaMA's RMSNorm do: the traced graph holds the input's dtype as a constant
    _op("softmax_upcast", "softmax", "torch.softmax({0}.float(), dim={1}).to({0}.dtype)", (T(), S(_dims)),
        _check_dim, saves_output=True),
    _op("rms_norm_upcast", "norm",
        "({0}.float() * torch.rsqrt({0}.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to({0}.dtype)",
        _u, _with_rank(1)),
    # random numbers under the program's fixed seed
    _op("dropout", "random", "F.dropout({0}, p={1}, training=True)", (T(), S(lambda t: (0.0, 0.5, 0.25))),
        random=True, view=True, eager_alias=True),
    _op("rand_like", "random", "{0} + torch.rand_like({0})", random=True, saves_inputs=False),
    # where the sign of zero, NaN and infinities show in the result
    # (autograd keeps copysign's result: its backward reads it)
    _op("copysign", "sign", "torch.copysign({0}, {1})", (T(), S(lambda t: (-1.0, 1.0, -0.0, 0.0), "number")),
        saves_output=True),
    _op("copysign_t", "sign", "torch.copysign({0}, {1})", _bin, _binary, saves_output=True),
    _op("reciprocal", "sign", "torch.reciprocal({0})", saves_output=True),
    _op("div_raw", "sign", "{0} / {1}", _bin, _binary),
    _op("signbit", "sign", "torch.signbit({0})", _u, _dtype("bool"), differentiable=False),
    _op("nan_to_num", "sign", "torch.nan_to_num({0}, nan={1}, posinf={2}, neginf={3})",
        (T(), S(lambda t: (0.0, -0.0, 1.0)), S(lambda t: (None, 1e4, 0.0)), S(lambda t: (None, -1e4, -0.0)))),
    # Python's type of a value read by the body: equal values of other types
    # (2, 2.0, True, IntSub(2); a tuple and a list) compute different things
    _op("type_is_int", "pytype", "({0} * 2 if type({1}) is int else {0} - 1)",
        (T(), S(lambda t: (2, 2.0, True, 1, 1.0))), saves_inputs=False),
    _op("isinstance_float", "pytype", "({0} * 2 if isinstance({1}, float) else {0} - 1)",
        (T(), S(lambda t: (1.0, 1, 2.0, 2, True))), saves_inputs=False),
    _op("isinstance_tuple", "pytype", "({0} * len({1}) if isinstance({1}, tuple) else {0} - len({1}))",
        (T(), S(lambda t: ((1, 2), PyList((1, 2)), (3,), PyList((3,))))), saves_inputs=False),
    # an int tensor scaled by a Python number: 2 keeps it int64, 2.0 makes it float (the default dtype)
    _op("long_scale", "pytype", "({0} * 4).long() * {1}", (T(), S(lambda t: (2, 2.0, 3, 3.0, True))),
        lambda t, v, e: TT(t[0].shape, promote_scalar("int64", v[0], e), t[0].contiguous), differentiable=False,
        saves_inputs=False),
    # Python values derived from a tensor's metadata, and ambient state read
    # into Python control flow or arguments
    _op("shape_branch", "derived", "({0} * 2 if {0}.shape[-1] % 2 == 0 else {0} - 1)", _u, _with_rank(1, same),
        saves_inputs=False),
    _op("size_arg", "derived", "{0} * {0}.size(-1)", _u, _with_rank(1, same)),
    _op("ndim_arg", "derived", "{0} * {0}.ndim"),
    _op("numel_arg", "derived", "{0} / {0}.numel()"),
    # data-dependent values: an unbacked size, a captured scalar (graph breaks
    # unless Dynamo captures them; drawn only through the dynamic:unbacked door)
    _op("nonzero_count", "unbacked", "{0} * ({0} > 0).nonzero().shape[0]"),
    _op("masked_select_sum", "unbacked", "{0} + torch.masked_select({0}, {0} > 0).sum()"),
    _op("item_scale", "unbacked", "{0} * {0}.detach().abs().amax().item()"),
    _op("dtype_branch", "derived", "({0} * 2 if {0}.dtype == torch.float32 else {0} - 1)", saves_inputs=False),
    _op("contiguous_branch", "derived", "({0} * 2 if {0}.is_contiguous() else {0} - 1)", saves_inputs=False),
    _op("stride_branch", "derived", "({0} * 2 if {0}.stride(-1) == 1 else {0} - 1)", _u, _with_rank(1, same),
        saves_inputs=False),
    _op("requires_grad_branch", "derived", "({0} * 2 if {0}.requires_grad else {0} - 1)", saves_inputs=False),
    _op("grad_enabled_branch", "derived", "({0} * 2 if torch.is_grad_enabled() else {0} - 1)", saves_inputs=False),
    _op("default_dtype_branch", "derived",
        "({0} * 2 if torch.get_default_dtype() == torch.float32 else {0} - 1)", saves_inputs=False),
    # a callable passed as a value: the same code computes another function
    _op("apply", "callable", "{1}({0})", (T(), S(lambda t: CALLABLES)), saves_output=True),
    # joining and splitting
    _op("cat", "join", "torch.cat([{0}, {1}], dim={2})", (T(), T(relation="same"), S(_dims)), _join(False),
        saves_inputs=False),
    _op("stack", "join", "torch.stack([{0}, {1}], dim={2})", (T(), T(relation="same"), S(_dims_and_new)),
        _join(True), saves_inputs=False),
    _op("split", "join", "torch.split({0}, {1}, dim={2})[0]", (T(), S(lambda t: (1, 2, 3)), S(_dims)), _split,
        view=True, saves_inputs=False),
    _op("chunk", "join", "{0}.chunk({1}, dim={2})[-1]", (T(), S(lambda t: (2, 3)), S(_dims)), _chunk, view=True,
        saves_inputs=False),
    _op("unbind", "join", "{0}.unbind({1})[0]", (T(), S(_dims)), _with_rank(2, _unbind), view=True,
        saves_inputs=False),
    # indexing and slicing
    _op("index", "index", "{0}[{1}]", (T(), S(lambda t: (0, -1, 1))), _with_rank(2, _index_int), view=True,
        saves_inputs=False),
    _op("slice", "index", "{0}[{1}]",
        (T(), S(lambda t: (PySlice(None, None, 2), PySlice(1, None), PySlice(None, -1), PySlice(-2, None)))),
        _index_slice, view=True, saves_inputs=False),
    _op("slice_last", "index", "{0}[..., {1}]",
        (T(), S(lambda t: (PySlice(None, None, 2), PySlice(1, None), PySlice(None, -1), PySlice(-2, None)))),
        _last_slice_arg, view=True, saves_inputs=False),
    _op("step_last", "index", "{0}[..., ::2]", _u, _last_slice(PySlice(None, None, 2)), view=True,
        saves_inputs=False),
    _op("neg_slice", "index", "{0}[..., -2:]", _u, _last_slice(PySlice(-2, None)), view=True, saves_inputs=False),
    _op("advanced_index", "index", "{0}[{1}]", (T(), S(lambda t: (PyList((0, -1)), PyList((0, 0, -1))))), _advanced,
        saves_inputs=False),
    _op("narrow", "index", "{0}.narrow({1}, 0, 1)", (T(), S(_dims)), _narrow, view=True, saves_inputs=False),
    # views and layout
    _op("view", "view", "{0}.view({1})", (T(), D(_merge_last_two)), _reshape_to(0, needs_contiguous=True),
        view=True, saves_inputs=False, dtypes=_ANY),
    _op("reshape", "view", "{0}.reshape({1})", (T(), D(lambda s: (-1, _last(s)))), _with_rank(2, _reshape_to(0)),
        view=True, saves_inputs=False, dtypes=_ANY),
    _op("flatten", "view", "{0}.flatten()", _u, lambda t, v, e: TT((_numel(t[0].shape),), t[0].dtype),
        view=True, saves_inputs=False, dtypes=_ANY),
    _op("transpose", "view", "{0}.transpose({1}, {2})", (T(), S(_dims), S(_dims)), _transpose, view=True,
        saves_inputs=False, dtypes=_ANY),
    _op("permute", "view", "{0}.permute({1})", (T(), S(_perms)), _permute, view=True, saves_inputs=False,
        dtypes=_ANY),
    _op("expand", "view", "{0}.expand({1})", (T(), D(lambda s: (2,) + s)), _expand, view=True, saves_inputs=False,
        dtypes=_ANY),
    _op("contiguous", "view", "{0}.contiguous()", _u, _contiguous, view=True, saves_inputs=False, dtypes=_ANY),
    _op("unsqueeze", "view", "{0}.unsqueeze({1})", (T(), S(_dims_and_new)), _unsqueeze, view=True,
        saves_inputs=False, dtypes=_ANY),
    _op("squeeze", "view", "{0}.squeeze({1})", (T(), S(_dims)), _squeeze, view=True, saves_inputs=False,
        dtypes=_ANY),
    _op("movedim", "view", "{0}.movedim({1}, {2})", (T(), S(_dims), S(_dims)), _movedim, view=True,
        saves_inputs=False, dtypes=_ANY),
    # dtype conversion
    _op("to_dtype", "dtype", "{0}.to({1})",
        (T(), S(lambda t: (DType("float64"), DType("bfloat16"), DType("float32")))), _to, view=True,
        saves_inputs=False),
    _op("type_as", "dtype", "{0}.type_as({1})", (T(), T(dtypes=FLOATS, relation="any")), _type_as,
        view=True, saves_inputs=False, dtypes=_ANY),
    _op("to_float", "dtype", "{0}.float()", _u, _dtype("float32"), view=True, saves_inputs=False, dtypes=_ANY),
    # factory calls inside the block (their dtype is the ambient default dtype)
    # (on the primary's device, so the program runs on any device as it is)
    _op("ones", "factory", "{0} + torch.ones({1}, device={0}.device)", (T(), D(lambda s: s)), _factory_add,
        saves_inputs=False),
    _op("arange", "factory", "{0} + torch.arange({1}, device={0}.device) / 4", (T(), D(lambda s: float(_last(s)))),
        _with_rank(1, _factory_add), saves_inputs=False),
    _op("full", "factory", "{0} * torch.full({1}, {2}, device={0}.device)",
        (T(), D(lambda s: s), S(lambda t: (0.5, 2.0, -1.0), "float")), _factory_add),
    _op("zeros_like", "factory", "torch.zeros_like({0}) + {0} * 2"),
    _op("ones_like", "factory", "{0} - torch.ones_like({0})", saves_inputs=False),
    # in-place variants, and writes through a view that mutate the base
    _op("add_", "inplace", "{0}.add_({1})", _bin, _inplace(_binary), inplace=True, saves_inputs=False),
    _op("mul_", "inplace", "{0}.mul_({1})", (T(), S(lambda t: (2.0, 0.5, -1.0), "float")), _inplace(_scalar),
        inplace=True),
    _op("clamp_", "inplace", "{0}.clamp_(min={1})", (T(), S(lambda t: (-1.0, 0.0, -0.5))), _inplace(same),
        inplace=True),
    _op("relu_", "inplace", "{0}.relu_()", _u, _inplace(same), inplace=True, saves_output=True),
    _op("sigmoid_", "inplace", "{0}.sigmoid_()", _u, _inplace(same), inplace=True, saves_output=True),
    _op("copy_", "inplace", "{0}.copy_({1})", (T(), T(dtypes=_ANY)), _inplace(_merge_add), inplace=True,
        saves_inputs=False),
    _op("slice_mul_", "inplace", "{out} = {0}\n{out}[..., :1].mul_({1})", (T(), S(lambda t: (2.0, 0.5, -1.0))),
        _inplace(_with_rank(1, _scalar)), inplace=True),
    _op("setitem", "inplace", "{out} = {0}\n{out}[..., 0] = {1}", (T(), S(lambda t: (0.0, 1.0, -2.0), "float")),
        _inplace(_with_rank(1, _scalar)), inplace=True, saves_inputs=False),
    # residual merges: how a chained block brings its result back to the carried value
    _op("merge_add", "merge", "{0} + {1}", (T(), T(relation="any")), _merge_same, saves_inputs=False),
    _op("merge_cast", "merge", "{0} + {1}.type_as({0})", (T(), T(dtypes=_ANY, relation="any")), _merge_add,
        saves_inputs=False),
    _op("merge_mean", "merge", "{0} + {1}.float().mean().type_as({0})", (T(), T(dtypes=_ANY, relation="any")),
        same, saves_inputs=False),
    # a call of a sub-block (generators.ir.CHILD): operands are the tensor, the
    # sub-block's name and its instance slot; the output's type is the sub-block
    # body's (generators.check types it), and the rule below is never asked.
    _op("block", "block", "{1}({0})", (T(), S(lambda t: ()), S(lambda t: ())), _typed_by_body,
        saves_output=True),
]

OPS: dict[str, OpSpec] = {op.name: op for op in _ENTRIES}
MERGES = ("merge_add", "merge_cast", "merge_mean")
CATEGORIES = tuple(dict.fromkeys(op.category for op in _ENTRIES))
# a call of an OpInfo case (generators.opinfo): operands are its tensors, its template, the output's
# shape and dtype; generators.check types it from those, and the rule below is never asked
OPS["opinfo"] = _op("opinfo", "opinfo", "", (), _typed_by_operands, saves_output=True)
# categories the generator never draws an op of: merges and sub-block calls are placed by the
# structure, unbacked ops by their own switch, OpInfo cases by the sweep and its steered search
UNDRAWN = ("merge", "block", "unbacked", "opinfo")


def render_call(op: OpSpec, operand_src: list[str], out: str, fmt: str = "") -> list[str]:
    """Source lines assigning ``op`` applied to ``operand_src`` to ``out``,
    written with ``fmt`` (one of its spellings, generators.spellings) or its own."""
    fmt = fmt or op.fmt
    if "{out}" in fmt:
        return fmt.format(*operand_src, out=out).split("\n")
    return [f"{out} = {fmt.format(*operand_src)}"]


def _view_transpose(t: TT) -> TT:
    if len(t.shape) < 2:
        raise Reject("transpose needs rank >= 2")
    return TT(t.shape[:-2] + (t.shape[-1], t.shape[-2]), t.dtype, False)


def _view_narrow(t: TT) -> TT:
    if not t.shape or t.shape[0] < 2:
        raise Reject("narrow needs a leading dim of at least 2")
    return TT((t.shape[0] - 1,) + t.shape[1:], t.dtype, t.contiguous)


# How a per-repeat tensor is passed at the call site: (format, type rule).
CALL_VIEWS: dict[str, tuple[str, Callable[[TT], TT]]] = {
    "none": ("{}", lambda t: t),
    "transpose": ("{}.transpose(-1, -2)", _view_transpose),
    "narrow": ("{}[1:]", _view_narrow),
    "contiguous": ("{}.contiguous()", lambda t: TT(t.shape, t.dtype, True)),
}
