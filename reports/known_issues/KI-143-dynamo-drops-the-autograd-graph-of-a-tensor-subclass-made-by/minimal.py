"""KI-143: a tensor subclass made by as_subclass inside torch.inference_mode(False) (grad mode back on), compiled and called under no_grad, comes out requires_grad=True with no grad_fn where eager keeps AliasBackward0: backward fails (raises while the bug lives; eager runs)"""
import torch


class TensorSub(torch.Tensor):
    pass


def f(x):
    with torch.inference_mode(False):  # re-enables grad mode in eager
        a = x.as_subclass(TensorSub)
        return a * a


x = torch.randn(3, requires_grad=True)
with torch.no_grad():
    torch.autograd.backward([f(x)], [torch.ones(3)])  # eager: through AliasBackward0 to x
    torch.autograd.backward([torch.compile(f, backend="eager", fullgraph=True)(x)], [torch.ones(3)])  # RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
print("not reproduced: the compiled output keeps its autograd graph")
