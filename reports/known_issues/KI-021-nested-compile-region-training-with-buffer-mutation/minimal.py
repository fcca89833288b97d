"""KI-021: a nested_compile_region updating batch_norm running stats cannot be compiled for training (raises while the bug lives)"""
import torch
import torch.nn.functional as F


@torch.compiler.nested_compile_region
def block(x, mean, var):
    return torch.sin(F.batch_norm(x, mean, var, training=True))


def f(x, mean, var):
    return block(block(x, mean, var), mean, var)


x = torch.randn(5, 4, requires_grad=True)
torch.compile(f, backend="aot_eager")(x, torch.zeros(4), torch.ones(4))
print("not reproduced: the compiled call ran")
