"""Backends with planted faults: real torch.compile backends that each break
one promise, to prove the oracles fire. Named as ``suites.planted:NAME``."""

from __future__ import annotations

import torch


def _wrap(transform):
    def backend(gm: torch.fx.GraphModule, example_inputs):
        def run(*args):
            outs = list(gm(*args))
            outs[-1] = transform(outs[-1])
            return outs

        return run

    return backend


def _bump_one(t: torch.Tensor) -> torch.Tensor:
    bump = torch.zeros_like(t)
    bump.view(-1)[0] = 1e-3
    return t + bump


# One output element off by 1e-3: beyond float32 noise, far below "obviously broken".
perturb_one_element = _wrap(_bump_one)
# The right values in the wrong dtype.
wrong_dtype = _wrap(lambda t: t.double())
# The right values, cut from the autograd graph: gradients silently vanish.
drop_gradient = _wrap(lambda t: t.detach())
not_a_backend = 42
