"""KI-024: Dynamo installs no guard on a torch.Tensor method descriptor held in a global: replacing it reuses the stale graph (exits 1 while the bug lives)"""
import torch

P0 = torch.Tensor.neg


def f(x):
    return P0(x)


compiled_f = torch.compile(f, backend="aot_eager")
x = torch.randn(4)
compiled_f(x)  # compiled for Tensor.neg
P0 = torch.sin
torch.testing.assert_close(compiled_f(x), f(x))  # stale: -x where eager gives sin(x)
print("not reproduced: the change of P0 recompiles")
