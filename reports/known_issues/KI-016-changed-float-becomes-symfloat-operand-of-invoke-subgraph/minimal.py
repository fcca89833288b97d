"""KI-016: after a global float changes, dedup passes its SymFloat into invoke_subgraph, which rejects it (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True
SCALE = 2.0


def block(x):
    return torch.sin(x) * SCALE


cf = torch.compile(lambda x: block(block(x)), backend="aot_eager")
x = torch.randn(3, 4)
cf(x)  # first compile runs
SCALE = 0.5
cf(x)  # recompile with SCALE a SymFloat raises
print("not reproduced: the compiled call after the change ran")
