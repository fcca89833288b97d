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
