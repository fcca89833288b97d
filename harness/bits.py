"""Whether two runs computed the same bits: what sparing a twin's compile rests on.

A fact, not a judgement (the oracles judge, with tolerances and a float64
referee): equal structure, ``requires_grad``, outputs, inputs and buffers
after the run and gradients, to the bit, signed zeros and NaN positions
included. Anything it cannot compare exactly (a sparse tensor, a Python
value that is not equal to itself) counts as different, so a doubt always
costs a compile, never a judgement.
"""

from __future__ import annotations

from typing import Any

import torch

from .outcome import Execution


def same_bits(a: Execution, b: Execution) -> bool:
    if a.failure is not None or b.failure is not None:
        return False
    if a.treespec != b.treespec or a.requires_grad != b.requires_grad or len(a.outputs) != len(b.outputs):
        return False
    if set(a.state) != set(b.state) or set(a.grads) != set(b.grads):
        return False
    pairs = [*zip(a.outputs, b.outputs), *((a.state[k], b.state[k]) for k in a.state),
             *((a.grads[k], b.grads[k]) for k in a.grads)]
    try:
        return all(_same(x, y) for x, y in pairs)
    except Exception:  # a value this cannot compare is a difference
        return False


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and _same_tensor(x, y)
    return type(x) is type(y) and x == y


def _same_tensor(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.layout != torch.strided or y.layout != torch.strided:
        return False
    if (x.dtype, x.shape, x.device) != (y.dtype, y.shape, y.device):
        return False
    if not (x.is_floating_point() or x.is_complex()):
        return torch.equal(x, y)
    nan = x.isnan()
    if not torch.equal(nan, y.isnan()):
        return False
    x, y = x.masked_fill(nan, 0), y.masked_fill(nan, 0)
    if not torch.equal(x, y):
        return False
    return x.is_complex() or torch.equal(torch.signbit(x), torch.signbit(y))
