"""KI-040: once a float global changed, the recompiled graph (the float made dynamic) computes with +0.0 for -0.0 (exits 1 while the bug lives)"""
import torch

P0 = 1.0


def f(x):
    return torch.copysign(x, P0)


compiled_f = torch.compile(f, backend="aot_eager")
x = torch.randn(4)
compiled_f(x)
P0 = 2.0
compiled_f(x)  # P0 changed: recompiles with P0 dynamic
P0 = -0.0  # served by that dynamic entry (no 0.0 entry exists, so not KI-025's == guard)
torch.testing.assert_close(compiled_f(x), f(x))  # |x| where eager gives -|x|
print("not reproduced: the compiled call keeps the sign of -0.0")
