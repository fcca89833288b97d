"""KI-133: a forward wrapped whole in region_activation_memory_budget that writes an input in place is rejected: the copy_ written back by AOTAutograd is unannotated (raises while the bug lives)"""
import torch


def f(x, y):
    with torch.autograd.graph.region_activation_memory_budget(0.0):
        y.sigmoid_()
        return x.sin() * 2


x, y = torch.randn(4, requires_grad=True), torch.randn(4)
# BackendCompilerFailed: RuntimeError: ... must cover the entire forward of a graph ... Unannotated ops: ['copy_']
torch.compile(f, backend="aot_eager")(x, y).sum().backward()
print("not reproduced: the forward compiled under its budget")
