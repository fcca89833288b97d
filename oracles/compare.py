"""Compare one compiled value with eager, using a float64 run as the referee.

Finite values pass if close to eager. Otherwise they still pass when their
error against float64 is within a small multiple of eager's own error, both as
RMSE (as torch._dynamo.utils.same does) and at the worst element (so a single
corrupted element in a large tensor is not averaged away).

Edge values are exact where the referee backs eager: where eager and float64
agree on NaN, on an infinity or on a signed zero, the program determines the
value and compiled must reproduce it (kinds "nan", "inf", "signed_zero").
Where they disagree (eager overflows or underflows where float64 does not) the
position is float noise and left out. A compiled NaN or infinity where both
are finite fails, unless eager is near the dtype's overflow range. Without a
referee, edge-value differences are inconclusive, never failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from .tolerance import for_dtype


@dataclass(frozen=True)
class Difference:
    # "dtype", "shape", "requires_grad", "type", "value", "mismatch", "missing",
    # "unexpected", "nan", "inf", "signed_zero"; "non_finite_reference": an
    # edge value no float64 referee settles (inconclusive)
    kind: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def inconclusive(self) -> bool:
        return self.kind == "non_finite_reference"


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a - b))).item() if a.numel() else 0.0


def compare(expected: Any, actual: Any, reference: Any, floor: Optional[torch.dtype] = None,
            signed_zeros: bool = True, noise: Any = None) -> Optional[Difference]:
    """None if ``actual`` is acceptable as a compiled version of ``expected``.

    ``floor`` is the least precise dtype the value passed through (a float64
    result of a float32 reduction is only float32-accurate, and so is the
    float64 run of the same program): tolerances are never tighter than its.
    ``signed_zeros=False`` leaves the sign of zeros unjudged: where a value
    may come from a reduction, whether a sum of -0.0s starts from +0.0 is the
    implementation's choice (eager's sum gives +0.0, inductor's -0.0)."""
    if expected is None or actual is None:
        if expected is None and actual is None:
            return None
        kind = "missing" if actual is None else "unexpected"
        return Difference(kind, f"expected {_describe(expected)}, got {_describe(actual)}")
    if isinstance(expected, torch.Tensor) != isinstance(actual, torch.Tensor):
        return Difference("type", f"expected {_describe(expected)}, got {_describe(actual)}")
    if not isinstance(expected, torch.Tensor):
        if type(expected) is not type(actual) or expected != actual:
            return Difference("value", f"expected {expected!r}, got {actual!r}")
        return None
    if _user_class(expected) is not _user_class(actual):
        return Difference("type", f"expected {type(expected).__name__}, got {type(actual).__name__}")
    return _compare_tensors(_plain(expected), _plain(actual), _plain(reference), floor, signed_zeros, _plain(noise))


def _user_class(t: torch.Tensor) -> Optional[type]:
    """A tensor's class when a program defined it (a torch.Tensor subclass of its own), else None."""
    return None if type(t).__module__.split(".")[0] == "torch" else type(t)


def _plain(t):
    """A program's tensor subclass instance as the plain tensor it holds (its values are what is compared)."""
    return t.as_subclass(torch.Tensor) if isinstance(t, torch.Tensor) and _user_class(t) is not None else t


def _compare_tensors(exp: torch.Tensor, act: torch.Tensor, ref: Optional[torch.Tensor],
                     floor: Optional[torch.dtype] = None, signed_zeros: bool = True,
                     noise: Optional[torch.Tensor] = None) -> Optional[Difference]:
    if exp.dtype != act.dtype:
        return Difference("dtype", f"expected dtype {exp.dtype}, got {act.dtype}")
    if exp.shape != act.shape:
        return Difference("shape", f"expected shape {tuple(exp.shape)}, got {tuple(act.shape)}")
    if not (exp.is_floating_point() or exp.is_complex()):
        if torch.equal(exp, act):
            return None
        bad = (exp != act).nonzero()
        return Difference("mismatch", f"{len(bad)} of {exp.numel()} elements differ (exact dtype)", {"index": bad[0].tolist()})
    tol = for_dtype(exp.dtype)
    if floor is not None and for_dtype(floor).atol > tol.atol:
        tol = for_dtype(floor)
    if not isinstance(ref, torch.Tensor) or ref.shape != exp.shape or ref.is_complex() != exp.is_complex() \
            or not (ref.is_floating_point() or ref.is_complex()):
        ref = None  # no float64 run to referee with (the program cannot run in float64)
    if exp.is_complex():  # real and imaginary parts, each a float of its own
        exp, act = _as_real(exp), _as_real(act)
        ref = _as_real(ref) if ref is not None else None
    big = torch.finfo(exp.dtype).max
    if floor is not None and floor.is_floating_point:
        big = min(big, torch.finfo(floor).max)
    if not (isinstance(noise, torch.Tensor) and noise.shape == exp.shape and noise.is_floating_point()) \
            or exp.is_complex():
        noise = None
    return _compare_floats(exp, act, ref, tol, big / 4, signed_zeros, noise)


def _as_real(t: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(t.resolve_conj())


def _compare_floats(exp: torch.Tensor, act: torch.Tensor, ref: Optional[torch.Tensor], tol, overflow: float,
                    signed_zeros: bool = True, noise: Optional[torch.Tensor] = None) -> Optional[Difference]:
    """Edge values first (NaN, infinities, signed zeros), then closeness over
    the positions where eager and the referee are both finite.
    ``overflow``: eager values beyond it may turn non-finite in compiled."""
    shape = tuple(exp.shape)
    e, a = exp.flatten(), act.flatten()
    e_fin, a_fin = torch.isfinite(e), torch.isfinite(a)
    if ref is None:
        r = e.double()
        # Without a referee, eager's value decides nothing at an edge value.
        finite = e_fin
        unsettled = ~(e_fin & a_fin) & ~_same_value(e, a)
        flipped = (e == 0) & (a == 0) & (torch.signbit(e) != torch.signbit(a))
    else:
        r = ref.flatten().to(torch.float64)
        ed = e.double()
        finite = e_fin & torch.isfinite(r)
        # Determined values: eager and float64 agree on them exactly.
        bad = torch.isnan(e) & torch.isnan(r) & ~torch.isnan(a)
        if bad.any():
            return _edge("nan", "NaN", bad, e, a, r, shape)
        bad = torch.isinf(e) & (ed == r) & (a != e)
        if bad.any():
            return _edge("inf", "infinity", bad, e, a, r, shape)
        wild = finite & ~a_fin & ~(e.abs() > overflow)
        if wild.any():
            first = int(wild.nonzero()[0])
            kind = "nan" if torch.isnan(a[first]) else "inf"
            return _edge(kind, "finite value", wild, e, a, r, shape)
        unsettled = torch.zeros_like(e_fin)
        zero = (e == 0) & (r == 0) & (torch.signbit(e) == torch.signbit(r))
        flipped = zero & (a == 0) & (torch.signbit(a) != torch.signbit(e))
    if not signed_zeros:
        flipped = torch.zeros_like(flipped)
    diff = _closeness(e, a, r, finite & a_fin, tol, shape,
                      noise.flatten() if noise is not None and ref is not None else None)
    if diff is not None:
        return diff
    if ref is not None and flipped.any():
        return _edge("signed_zero", "signed zero", flipped, e, a, r, shape)
    if unsettled.any() or flipped.any():
        where = unsettled if unsettled.any() else flipped
        what = "NaN/Inf" if unsettled.any() else "sign of zero"
        d = _edge("non_finite_reference", what, where, e, a, None, shape)
        return Difference(d.kind, f"{d.message}; no float64 referee to settle it", d.details)
    return None


def _same_value(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: equal, NaN equal to NaN (0.0 equal to -0.0)."""
    return (a == b) | (torch.isnan(a) & torch.isnan(b))


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: equal with the same sign bit, NaN equal to NaN."""
    return ((a == b) & (torch.signbit(a) == torch.signbit(b))) | (torch.isnan(a) & torch.isnan(b))


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for n in reversed(shape):
        index.append(flat % n)
        flat //= n
    return index[::-1]


def _edge(kind: str, what: str, bad: torch.Tensor, e: torch.Tensor, a: torch.Tensor, r: Optional[torch.Tensor],
          shape: tuple[int, ...]) -> Difference:
    first = int(bad.nonzero()[0])
    index = _unravel(first, shape)
    details = {
        "index": index,
        "expected": e[first].item(),
        "actual": a[first].item(),
        "float64": None if r is None else r[first].item(),
        "count": int(bad.sum()),
    }
    fp64 = "" if r is None else f" (fp64 {details['float64']:.6g})"
    return Difference(
        kind,
        f"{details['count']} of {e.numel()} elements differ at a {what}; first at {index}: "
        f"expected {details['expected']:.6g}, got {details['actual']:.6g}{fp64}",
        details,
    )


def _closeness(e: torch.Tensor, a: torch.Tensor, r64: torch.Tensor, keep: torch.Tensor, tol,
               shape: tuple[int, ...], noise: Optional[torch.Tensor] = None) -> Optional[Difference]:
    """The tolerance, then the float64 referee, over the ``keep`` positions.
    ``noise``: eager run at the precision the backend computes in; its error
    is as much as the compiled one may have (where it is finite)."""
    at = keep.nonzero().squeeze(1)
    e, a, r64 = e[at], a[at], r64[at]
    if torch.allclose(e, a, atol=tol.atol, rtol=tol.rtol):
        return None
    err_act = (a.double() - r64).abs()
    err_exp = (e.double() - r64).abs()
    rmse_act, rmse_exp = _rmse(a.double(), r64), _rmse(e.double(), r64)
    if noise is not None:
        n = noise[at].double()
        err_low = torch.where(torch.isfinite(n), (n - r64).abs(), err_exp)
        err_exp = torch.maximum(err_exp, err_low)
        rmse_exp = max(rmse_exp, _rmse(torch.where(torch.isfinite(n), n, e.double()), r64))
    within_rmse = rmse_act <= tol.multiplier * rmse_exp + tol.atol / 10
    # every element: as far from fp64 as eager's worst (times the multiplier), or within the tolerance's relative
    # term of fp64's magnitude: a reordered bfloat16 sum is a few ulps off where eager happened to land on fp64
    within_max = bool((err_act <= tol.multiplier * err_exp.max() + tol.atol + tol.rtol * r64.abs()).all())
    if within_rmse and within_max:
        return None
    worst = int(err_act.argmax())
    index = _unravel(int(at[worst]), shape)
    details = {
        "index": index,
        "expected": e[worst].item(),
        "actual": a[worst].item(),
        "float64": r64[worst].item(),
        "max_abs_diff": (a.double() - e.double()).abs().max().item(),
        "rmse_compiled_vs_fp64": rmse_act,
        "rmse_eager_vs_fp64": rmse_exp,
        "tolerance": {"atol": tol.atol, "rtol": tol.rtol, "multiplier": tol.multiplier},
    }
    return Difference(
        "mismatch",
        f"max |compiled - eager| = {details['max_abs_diff']:.3g} at {index}: "
        f"expected {details['expected']:.6g}, got {details['actual']:.6g} (fp64 {details['float64']:.6g})",
        details,
    )


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"tensor({tuple(x.shape)}, {x.dtype})"
    return repr(x)


def bitwise_equal(a: Any, b: Any) -> bool:
    """Exact equality, 0.0 apart from -0.0 and NaN equal to NaN: the
    nondeterminism gate, and the ``exact`` mode of differential.compare_runs."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.is_complex():
            a, b = _as_real(a), _as_real(b)
        if not a.is_floating_point():
            return torch.equal(a, b)
        return bool(_same_bits(a, b).all())
    return type(a) is type(b) and a == b
