"""KI-163: iree-turbine returns one buffer for two outputs that compute the same value: a write through one
changes the other (eager returns two tensors). Exit 1 while it reproduces."""
import sys

import iree.turbine.dynamo  # noqa: F401  (registers backend="turbine_cpu")
import torch


def f(x):
    return x * 2, x * 2


with torch.no_grad():
    a, b = torch.compile(f, backend="turbine_cpu")(torch.randn(3))
a.fill_(0.0)  # eager: b keeps 2 * x
shared = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
print("the two outputs share storage:", shared, "| b after writing a:", b.tolist())
sys.exit(1 if shared else 0)
