"""KI-069: inductor fails on two deduplicated masked_select(v, v > 0).sum() blocks with unbacked shapes (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True


def block(x):
    v = x * 2.0
    return v + torch.masked_select(v, v > 0).sum()


def f(h):
    h = h + block(h)
    return h + block(h)


torch.compile(f, backend="inductor")(torch.randn(2, 5, 5))  # TypeError: unsupported operand type(s) for -: 'GreaterThan' and 'GreaterThan'
print("not reproduced: inductor compiles the deduplicated masked_select blocks")
