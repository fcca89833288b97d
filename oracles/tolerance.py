"""Tolerances as data, following torch._dynamo.utils.same (the accuracy checker
PyTorch's own benchmarks use)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    # The compiled error against fp64 may be this many times eager's own error.
    multiplier: float


DEFAULT = Tolerance(1e-4, 1e-4, 3.0)
BY_DTYPE: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(1e-7, 1e-7, 3.0),
    torch.float32: DEFAULT,
    torch.float16: Tolerance(1e-2, 1e-2, 3.0),
    torch.bfloat16: Tolerance(1.6e-2, 1.6e-2, 3.0),
}


def for_dtype(dtype: torch.dtype) -> Tolerance:
    return BY_DTYPE.get(dtype, DEFAULT)


MANTISSA_BITS = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}


def backend_floor(floor: str, precision) -> str:
    """The program's precision floor on a backend that computes some dtypes
    in a less precise one (``RunConfig.precision``): no value can be more
    accurate than the least precise dtype any of its values went through."""
    used = [floor] + [low for given, low in precision if MANTISSA_BITS.get(given, 0) >= MANTISSA_BITS.get(floor, 0)]
    return min(used, key=lambda d: MANTISSA_BITS.get(d, 24))
