"""KI-139: graph deduplication turns a region that starts at a getitem of a tuple-output node (x.max(0)[0]), whose value is also used outside the region, into an invoke_subgraph that takes its own output: a cycle, and _stable_topological_sort raises 'stable topological sort failed' (raises while the bug lives; deduplication off runs)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def step(x):
    v = x.max(0)[0]  # the tuple node max(x, 0), its getitem v, also returned: used outside the region
    return v, v.sin()


def g(a, b):  # the two max nodes differ (3 rows, 5 rows); their getitems and sins hash alike
    return step(a) + step(b)


a, b = torch.randn(3, 2), torch.randn(5, 2)
expected = g(a, b)
got = torch.compile(g, backend="eager")(a, b)  # AssertionError: stable topological sort failed
assert all(torch.equal(x, y) for x, y in zip(expected, got))
print("not reproduced: compiled with deduplication, matches eager")
