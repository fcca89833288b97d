"""KI-023: recompiling a nested_compile_region after a global float it reads changed: 'item' does not belong to this Graph (raises while the bug lives)"""
import torch
import torch.nn.functional as F

P0 = 0.01


@torch.compiler.nested_compile_region
def block(x):
    return F.leaky_relu(x, negative_slope=P0)


cf = torch.compile(lambda x: block(block(x)), backend="aot_eager")
x = torch.randn(1, 1)
cf(x)  # first compile runs
P0 = 0.2
cf(x)  # the recompile raises
print("not reproduced: the compiled call after the change ran")
