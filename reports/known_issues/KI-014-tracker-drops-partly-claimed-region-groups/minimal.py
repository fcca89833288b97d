"""KI-014: dedup drops a region group when some members' next nodes were claimed: two identical calls stay plain ops (exits 1 while the bug lives)"""
import torch
from torch._dynamo.testing import AotEagerAndRecordGraphs

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    return torch.sin(torch.sin(x))


def f(h):
    h = block(block(h))  # calls 1, 2: identical to each other, yet left as plain sin ops
    for _ in range(2):  # calls 3, 4: the add-rooted group is expanded first and claims their sin nodes
        h = h + block(h)
    return h


backend = AotEagerAndRecordGraphs()
torch.compile(f, backend=backend)(torch.randn(1, 1))
plain = [n.name for n in backend.graphs[0].graph.nodes if n.target is torch.sin]
assert not plain, f"sin ops left outside invoke_subgraph calls: {plain}\n{backend.graphs[0].code}"
print("not reproduced: every call of block is deduplicated")
