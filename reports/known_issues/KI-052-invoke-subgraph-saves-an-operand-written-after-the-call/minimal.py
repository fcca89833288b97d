"""KI-052: an invoke_subgraph operand written in place after the call fails autograd's version check (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def block(x, y):
    return x + (y + y)


def f(x, y):
    h = block(x, y)
    y.mul_(-0.5)  # add's backward saves nothing: eager runs
    return block(h, y)


torch.compile(f, backend="aot_eager")(torch.randn(1, requires_grad=True), torch.randn(1))
print("not reproduced: the compiled call ran")
