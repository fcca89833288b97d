"""KI-063: AOTAutograd fails on a reused nested_compile_region body under autocast: expected bfloat16 but found float32 (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def attn(x, w):
    return torch.einsum("...i,ji->...j", x, w)


def f(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        attn(x, w)  # results unused as found; returning them fails alike
        attn(x, w)
        return x * 2


torch.compile(f, backend="aot_eager")(torch.randn(1, 2, dtype=torch.bfloat16), torch.randn(2, 2))
print("not reproduced: the compiled call ran")
