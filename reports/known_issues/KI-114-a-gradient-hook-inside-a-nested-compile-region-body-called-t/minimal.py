"""KI-114: a gradient hook inside a nested_compile_region body called twice, eager backend: hook on a tensor not requiring grad (raises while the bug lives)"""
import torch


def double(g):
    return g * 2


@torch.compiler.nested_compile_region
def block(x):
    y = x.sin()
    y.register_hook(double)
    return y.cos()


x = torch.randn(3, requires_grad=True)
torch.compile(lambda x: block(block(x)), backend="eager")(x)
print("not reproduced: the compiled call ran")
