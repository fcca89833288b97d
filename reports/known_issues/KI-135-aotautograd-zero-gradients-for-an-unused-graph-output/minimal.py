"""KI-135: AOTAutograd gives zeros, where eager gives None, to a leaf reaching only a graph output no gradient flows into (raises while the bug lives)"""
import torch


def f(x, w):
    v0 = x * 2
    return v0.sin(), v0 @ w  # the second output is the only path to w


x, w = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
a, b = torch.compile(f, backend="aot_eager", fullgraph=True)(x, w)
a.sum().backward()  # only the first output is differentiated
assert w.grad is None, f"w.grad is {w.grad.flatten().tolist()} where eager leaves None"
print("not reproduced: w.grad is None, as in eager")
