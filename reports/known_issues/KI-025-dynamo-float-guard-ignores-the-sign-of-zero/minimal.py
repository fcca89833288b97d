"""KI-025: Dynamo's == guard on a float global reuses the graph specialized on 0.0 for -0.0 (exits 1 while the bug lives)"""
import torch

P0 = 0.0


def f(x):
    return torch.copysign(x, P0)


compiled_f = torch.compile(f, backend="aot_eager")
x = torch.randn(4)
compiled_f(x)  # compiled with P0 = 0.0 baked in
P0 = -0.0  # 0.0 == -0.0, so the guard passes
torch.testing.assert_close(compiled_f(x), f(x))  # stale: |x| where eager gives -|x|
print("not reproduced: the change of P0 to -0.0 recompiles")
