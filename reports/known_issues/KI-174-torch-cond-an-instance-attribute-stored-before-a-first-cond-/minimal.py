"""KI-174: torch.cond's branches read an instance attribute stored before an earlier cond at that first value,
after the frame rebound it (obj.p = 1.0; cond; obj.p = True; cond). No nested_compile_region, no deduplication:
backend eager is wrong alike. Exit 1: reproduced."""
import sys

import torch


class Config:
    def __init__(self):
        self.p = 1.0


obj = Config()


def branch(x):
    return x * 2 if isinstance(obj.p, float) else x - 1


def f(x):
    obj.p = 1.0
    h = torch.cond(x.sum() > 0, branch, branch, (x,))
    obj.p = True
    return torch.cond(h.sum() > 0, branch, branch, (h,))  # eager: x * 2 - 1


x = torch.ones(2)
expected = f(x)
got = torch.compile(f, backend="eager", fullgraph=True)(x)
print("eager", expected.tolist(), "compiled", got.tolist())
if not torch.equal(expected, got):
    print("KI-174 reproduced: the second cond's branches read obj.p == 1.0", file=sys.stderr)
    sys.exit(1)
