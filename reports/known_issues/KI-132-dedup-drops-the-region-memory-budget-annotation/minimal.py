"""KI-132: graph deduplication drops the region_activation_memory_budget annotation from the invoke_subgraph calls it inserts, so a forward wrapped whole in the budget is rejected (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    return torch.sin(x).cos() * x


def f(x):
    with torch.autograd.graph.region_activation_memory_budget(0.0):
        return block(block(x)).sum()


x = torch.randn(4, requires_grad=True)
# BackendCompilerFailed: RuntimeError: ... must cover the entire forward of a graph ... Unannotated ops: ['invoke_subgraph', 'getitem', ...]
torch.compile(f, backend="aot_eager")(x).backward()
print("not reproduced: the deduplicated forward compiled under its budget")
