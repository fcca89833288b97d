"""KI-012: with dynamic=True, identical calls traced before and after a symbol is specialized are never deduplicated (exits 1 while the bug lives)"""
import torch
from torch._dynamo.testing import AotEagerAndRecordGraphs

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    # the broadcast specializes s0 (x.shape[0]) to 3 after the 1st call was hashed; torch.ones(x.shape[0]) dedups fine
    return x + torch.ones(3)


def f(x, y):
    return block(x), block(y), block(x)


for dynamic in (False, True):  # static: the 1st and 3rd calls become invoke_subgraph calls; dynamic: none
    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()
    torch.compile(f, backend=backend, dynamic=dynamic)(torch.randn(3), torch.randn(3))
    calls = [n for n in backend.graphs[0].graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph]
    assert calls, f"dynamic={dynamic}: no invoke_subgraph call\n{backend.graphs[0].code}"
print("not reproduced: identical calls are deduplicated with dynamic shapes too")
