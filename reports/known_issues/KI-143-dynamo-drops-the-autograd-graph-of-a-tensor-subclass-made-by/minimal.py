"""KI-143: a tensor subclass made by as_subclass inside torch.inference_mode(False) (which turns grad mode back on),
compiled and called under no_grad, comes out requires_grad=True with no grad_fn, where eager keeps AliasBackward0:
the gradient to x is lost (raises while the bug lives; eager runs)"""
import torch


class TensorSub(torch.Tensor):
    pass


def f(x):
    with torch.inference_mode(False):  # re-enables grad mode in eager
        a = x.as_subclass(TensorSub)
        return a * a


x = torch.randn(3, requires_grad=True)
with torch.no_grad():
    expected = f(x)
    got = torch.compile(f, backend="eager", fullgraph=True)(x)
print("eager grad_fn:", expected.grad_fn, "| compiled requires_grad:", got.requires_grad, "grad_fn:", got.grad_fn)
torch.autograd.grad(expected.sum(), x)  # eager: fine
torch.autograd.grad(got.sum(), x)  # RuntimeError: ... appears to not have been used in the graph
print("not reproduced: the compiled output keeps its autograd graph")
