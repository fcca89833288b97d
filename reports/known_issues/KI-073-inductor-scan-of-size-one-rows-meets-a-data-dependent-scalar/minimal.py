"""KI-073: inductor fails to compile a torch scan (decompose_scan_to_while_loop calls .item()): DataDependentOutputException (raises while the bug lives)"""
import torch
from torch._higher_order_ops import scan

# Passes with torch._dynamo.config.capture_scalar_outputs = True.


def f(x):
    def step(carry, row):
        out = carry + row
        return out, out.clone()
    return scan(step, torch.zeros_like(x[0]), x)[1]


x = torch.randn(4, 3)
torch.testing.assert_close(torch.compile(f, backend="inductor")(x), x.cumsum(0))
print("not reproduced: compiled scan matches eager")
