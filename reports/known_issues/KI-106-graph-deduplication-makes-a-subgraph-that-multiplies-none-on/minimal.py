"""KI-106: graph deduplication emits a subgraph computing `None * 2` for a helper x + x[..., ::2] on a strided input (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True

def mlp(x):
    return x + x[..., ::2]

def block(x):
    v1 = mlp(mlp(x))
    return v1 * 2 + (x - v1)

def f(x):
    h = x + block(x)
    return h + block(h)

x = torch.randn(4)[::2]  # a strided view of two elements (a contiguous x runs)
torch.compile(f, backend="eager", fullgraph=True)(x)  # TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'
print("not reproduced: the compiled call ran")
