"""KI-109: aot_eager returns one tensor for two F.layer_norm outputs of an input requiring grad (CSE), where eager returns two (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F


def f(x):
    return F.layer_norm(x, (3,)), F.layer_norm(x, (3,))


torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
a, b = torch.compile(f, backend="aot_eager")(x)
ea, eb = f(x)
torch.testing.assert_close((a, b), (ea, eb))  # the values agree
with torch.no_grad():
    a.zero_()  # a write to the first output
    ea.zero_()
print("compiled outputs are one tensor:", a is b)
torch.testing.assert_close(b, eb)  # compiled: b was zeroed too (a is b)
print("not reproduced: the compiled outputs are two tensors")
