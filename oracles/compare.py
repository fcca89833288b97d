"""Compare one compiled value with eager, using a float64 run as the referee.

A value passes if it is close to eager. Otherwise it still passes when its
error against float64 is within a small multiple of eager's own error, both as
RMSE (as torch._dynamo.utils.same does) and at the worst element (so a single
corrupted element in a large tensor is not averaged away).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from .tolerance import for_dtype


@dataclass(frozen=True)
class Difference:
    kind: str  # "dtype", "shape", "requires_grad", "type", "value", "mismatch", "missing", "unexpected", "non_finite_reference"
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def inconclusive(self) -> bool:
        return self.kind == "non_finite_reference"


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a - b))).item() if a.numel() else 0.0


def compare(expected: Any, actual: Any, reference: Any, floor: Optional[torch.dtype] = None) -> Optional[Difference]:
    """None if ``actual`` is acceptable as a compiled version of ``expected``.

    ``floor`` is the least precise dtype the value passed through (a float64
    result of a float32 reduction is only float32-accurate, and so is the
    float64 run of the same program): tolerances are never tighter than its."""
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
    return _compare_tensors(expected, actual, reference, floor)


def _compare_tensors(exp: torch.Tensor, act: torch.Tensor, ref: Optional[torch.Tensor],
                     floor: Optional[torch.dtype] = None) -> Optional[Difference]:
    if exp.dtype != act.dtype:
        return Difference("dtype", f"expected dtype {exp.dtype}, got {act.dtype}")
    if exp.shape != act.shape:
        return Difference("shape", f"expected shape {tuple(exp.shape)}, got {tuple(act.shape)}")
    if not (exp.is_floating_point() or exp.is_complex()):
        if torch.equal(exp, act):
            return None
        bad = (exp != act).nonzero()
        return Difference("mismatch", f"{len(bad)} of {exp.numel()} elements differ (exact dtype)", {"index": bad[0].tolist()})
    if not torch.isfinite(exp).all() or (isinstance(ref, torch.Tensor) and not torch.isfinite(ref).all()):
        return Difference("non_finite_reference", "NaN/Inf in the eager or float64 reference")
    tol = for_dtype(exp.dtype)
    if floor is not None and for_dtype(floor).atol > tol.atol:
        tol = for_dtype(floor)
    if torch.isfinite(act).all() and torch.allclose(exp, act, atol=tol.atol, rtol=tol.rtol):
        return None
    if not isinstance(ref, torch.Tensor) or ref.shape != exp.shape:
        # No float64 run to referee with (the program cannot run in float64):
        # the tolerance alone decides.
        ref = exp
    ref64 = ref.to(torch.float64)
    err_act = (act.to(torch.float64) - ref64).abs()
    err_exp = (exp.to(torch.float64) - ref64).abs()
    rmse_act, rmse_exp = _rmse(act.double(), ref64), _rmse(exp.double(), ref64)
    max_act, max_exp = err_act.max().item(), err_exp.max().item()
    within_rmse = rmse_act <= tol.multiplier * rmse_exp + tol.atol / 10
    within_max = max_act <= tol.multiplier * max_exp + tol.atol
    if torch.isfinite(act).all() and within_rmse and within_max:
        return None
    worst = int(torch.nan_to_num(err_act, nan=float("inf")).flatten().argmax())
    index = list(torch.unravel_index(torch.tensor(worst), exp.shape)) if exp.dim() else []
    index = [int(i) for i in index]
    at = tuple(index)
    details = {
        "index": index,
        "expected": exp[at].item() if exp.dim() else exp.item(),
        "actual": act[at].item() if act.dim() else act.item(),
        "float64": ref64[at].item() if ref64.dim() else ref64.item(),
        "max_abs_diff": (act.double() - exp.double()).abs().max().item(),
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
    """Exact equality, with NaN equal to NaN: the nondeterminism gate."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return torch.equal(a, b) or (a.is_floating_point() and bool(torch.isclose(a, b, 0, 0, equal_nan=True).all()))
    return type(a) is type(b) and a == b
