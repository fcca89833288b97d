"""KI-138: the min-cut partitioner saves a graph input that needs no gradient (to recompute add/sin in the backward), so
an in-place write to it after the compiled call fails the backward's version check, where eager saves nothing of it
and runs (raises while the bug lives)"""
import torch
import torch.nn.functional as F

w = torch.nn.Parameter(torch.tensor(0.5))


def f(x, y):
    return torch.sin(F.log_softmax(x, dim=-2) + y) * w


torch.manual_seed(0)
x, y = torch.randn(4, 2, requires_grad=True), torch.randn(4, 2)
out = torch.compile(f, backend="aot_eager", fullgraph=True)(x, y)
y.mul_(-0.5)  # eager allows this: no backward formula of f saves y
out.sum().backward()  # RuntimeError: one of the variables needed for gradient computation has been modified ...
print("not reproduced: the backward ran, as in eager")
