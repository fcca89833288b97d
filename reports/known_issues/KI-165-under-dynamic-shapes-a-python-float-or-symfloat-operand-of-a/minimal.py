"""KI-165: under dynamic shapes a float computed from a size, in a tensor op inside region_activation_memory_budget, is rejected: tensorify_python_scalars' new nodes lack the annotation (raises while the bug lives)"""
import torch


def f(x):
    with torch.autograd.graph.region_activation_memory_budget(0.4):
        return x.sin() + x.numel() * 0.5


# BackendCompilerFailed: RuntimeError: ... must cover the entire forward ... Unannotated ops: ['scalar_tensor_default', ...]
torch.compile(f, backend="aot_eager", dynamic=True)(torch.randn(8, requires_grad=True))
print("not reproduced: the forward compiled under its budget")
