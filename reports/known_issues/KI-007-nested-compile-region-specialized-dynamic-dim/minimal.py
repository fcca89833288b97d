"""KI-007: nested_compile_region raises KeyError <size> when a maybe-dynamic dim is specialized inside it (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.cos(x @ w)


def f(x, w):
    return block(x, w), block(x, w)


x, w = torch.randn(2), torch.randn(2, 2)
torch._dynamo.maybe_mark_dynamic(x, 0)  # x @ w specializes this dim to 2
torch.compile(f, backend="aot_eager")(x, w)
print("not reproduced: the compiled call ran")
