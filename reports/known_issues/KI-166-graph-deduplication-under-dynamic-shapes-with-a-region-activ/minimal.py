"""KI-166: with graph deduplication and dynamic shapes, the pass's body binds its size symbol with a sym_size node that lacks the region budget's annotation (raises while the bug lives; right with deduplication off)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    return x.sin() * x.shape[0]


def f(x):
    with torch.autograd.graph.region_activation_memory_budget(0.4):
        return block(block(x))


# BackendCompilerFailed: RuntimeError: ... must cover the entire forward ... Unannotated ops: ['sym_size_int_4']
torch.compile(f, backend="aot_eager", dynamic=True)(torch.randn(3, 4, requires_grad=True))
print("not reproduced: the deduplicated forward compiled under its budget")
