"""KI-117: a nested_compile_region body traced for (h, h) is reused for (h, view of h): inputs misplaced, broadcast error (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def block(x, y, g):
    return x[:, 2:] + g


def f(h, g):
    return block(h, h, g), block(h, h[..., :1], g)


torch.compile(f, backend="aot_eager")(torch.randn(1, 4, 1), torch.tensor(0.75))
print("not reproduced: the compiled call ran")
