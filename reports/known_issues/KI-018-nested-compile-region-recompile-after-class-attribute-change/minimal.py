"""KI-018: recompiling a nested_compile_region after a class attribute it reads changed fails in Dynamo (raises while the bug lives)"""
import torch


class Settings:
    p0 = 0.5


@torch.compiler.nested_compile_region
def block(x):
    return x * Settings.p0


cf = torch.compile(lambda x, t: (block(x), block(t)), backend="eager")
x, t = torch.randn(2), torch.randn(3)  # different shapes: two traces of block
cf(x, t)  # first compile runs
Settings.p0 = 0.0
cf(x, t)  # the recompile raises
print("not reproduced: the compiled call after the change ran")
