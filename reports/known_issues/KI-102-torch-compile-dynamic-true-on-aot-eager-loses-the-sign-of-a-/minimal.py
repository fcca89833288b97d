"""KI-102: torch.compile(dynamic=True) on aot_eager loses the sign of a -0.0 float global: copysign(y, -0.0) returns |y| (exits 1 while the bug lives)"""
import torch

SIGN = -0.0


def f(y):
    return torch.copysign(y, SIGN)


y = torch.tensor([1.0, -2.0, 3.0])
torch.testing.assert_close(torch.compile(f, backend="aot_eager", dynamic=True)(y), f(y))  # eager: -|y|
print("not reproduced: compiled matches eager")
