"""KI-009: a factory call made under set_default_dtype(float64) inside compiled code yields float32 (exits 1 while the bug lives)"""
import torch


def f(x):
    torch.set_default_dtype(torch.float64)
    out = x + torch.ones((4,))  # eager: float64 (type promotion with the float64 ones)
    torch.set_default_dtype(torch.float32)
    return out


x = torch.randn(4)
eager = f(x)
compiled = torch.compile(f, backend="aot_eager")(x)
print("eager:", eager.dtype, "compiled:", compiled.dtype)
torch.testing.assert_close(compiled, eager)
print("not reproduced: the compiled output has eager's dtype")
