"""KI-062: torch.cond gives a zero gradient, not None, to a parameter its branch reads but does not use (exits 1 while the bug lives)"""
import torch

torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(3, 3))
x = torch.randn(1, requires_grad=True)


def branch(t):
    unused = w * 2  # reads w; w never reaches the output
    return t.abs()


torch.cond(x.sum() > 0, branch, lambda u: branch(u * 0.5), (x,)).sum().backward()
actual, w.grad = w.grad, None  # a tensor of zeros
(branch(x) if x.sum() > 0 else branch(x * 0.5)).sum().backward()  # the Python `if`: w.grad stays None
assert (actual is None) == (w.grad is None), f"torch.cond gave w.grad={actual}, the Python if gave {w.grad}"
print("not reproduced: torch.cond leaves an unused parameter's gradient None")
