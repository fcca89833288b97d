"""KI-064: with dynamic=True, dedup does not replace two identical block calls holding a dead node (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F
from torch._dynamo.testing import AotEagerAndRecordGraphs

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    v = F.layer_norm(x, (2,))
    dead = torch.lerp(v, v, 0.9)  # nobody reads it; with `return x + dead + ...` both calls are deduplicated
    return x + torch.arange(2.0) / 4


for dynamic in (False, True):  # static: invoke_subgraph calls; dynamic: none
    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()
    torch.compile(lambda x: block(block(x)), backend=backend, dynamic=dynamic)(torch.randn(1, 2))
    calls = [n for n in backend.graphs[0].graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph]
    assert calls, f"dynamic={dynamic}: no invoke_subgraph call\n{backend.graphs[0].code}"
print("not reproduced: both calls are deduplicated with dynamic shapes too")
