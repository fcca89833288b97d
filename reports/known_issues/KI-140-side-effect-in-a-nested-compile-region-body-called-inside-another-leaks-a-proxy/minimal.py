"""KI-140: a tensor made inside a nested_compile_region body and stored in a Python list (a side effect), that body called inside another nested_compile_region body: the graph's output names a node of the outer body's subgraph (with graph deduplication: KeyError: 'getitem_1'; without: "Argument 'getitem_2' of Node 'output' does not belong to this Graph"). Raises while the bug lives."""
import torch

torch._dynamo.config.use_graph_deduplication = True
TRACE = []


@torch.compiler.nested_compile_region
def inner(x):
    TRACE.append(x.cos())  # a side effect of the body
    return x.cos()


@torch.compiler.nested_compile_region
def outer(x):
    inner(x)
    return x.abs()


torch.compile(outer, backend="eager")(torch.randn(5))
