"""KI-072: AOTAutograd's backward reads an input the compiled forward wrote in place: d/dp is computed from y after y.add_ (exits 1 while the bug lives)"""
import torch


def f(x, y, p):
    a = (torch.sin(x) + y) * p  # d/dp needs sin(x) + y as it was here
    y.add_(1.0)
    b = (torch.sin(x) + y) * p
    return a, b


def grad_p(fn):
    torch.manual_seed(0)
    x, y, p = torch.randn(3), torch.randn(3), torch.tensor(2.0, requires_grad=True)
    torch.autograd.backward(fn(x, y, p), [torch.ones(3), torch.ones(3)])
    return p.grad


eager, compiled = grad_p(f), grad_p(torch.compile(f, backend="aot_eager"))
print("eager:", eager.item(), "compiled:", compiled.item())
torch.testing.assert_close(compiled, eager)
print("not reproduced: the compiled gradient matches eager")
