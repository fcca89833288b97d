"""KI-141: F.dropout inside torch.func.vjp (or torch.func.grad) on an input with a dynamic dimension, under
torch.compile, fails in Dynamo: 'Cannot call numel() on tensor with symbolic sizes/strides' (raises while the bug
lives; eager, or static shapes, run)"""
import torch
import torch.nn.functional as F


def f(x):
    out, pull = torch.func.vjp(lambda x0: F.dropout(x0, p=0.5, training=True), x)
    return out, pull(torch.ones_like(out))


x = torch.randn(2, 1, 1)
f(x)  # eager runs
torch._dynamo.mark_dynamic(x, 0)
torch.compile(f, backend="eager")(x)  # TorchRuntimeError: RuntimeError when making fake tensor call ... numel()
print("not reproduced: dropout under torch.func.vjp compiled with a dynamic dimension")
