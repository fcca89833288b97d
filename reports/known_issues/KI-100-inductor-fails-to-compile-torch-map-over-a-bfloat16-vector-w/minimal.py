"""KI-100: inductor fails to compile a torch map (decompose_map_to_while_loop calls .item()): DataDependentOutputException (raises while the bug lives)"""
import torch
from torch._higher_order_ops import map as torch_map

# Passes with torch._dynamo.config.capture_scalar_outputs = True.


def f(x):
    return torch_map(lambda row: row * 2, x)


x = torch.randn(4, 3)
torch.testing.assert_close(torch.compile(f, backend="inductor")(x), x * 2)
print("not reproduced: compiled map matches eager")
