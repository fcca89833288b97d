"""KI-010: graph deduplication changes which call draws which random numbers (exits 1 while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    return x + torch.rand_like(x)


def f(x, y):
    return block(x), block(x), block(y), block(y)


x, y = torch.randn(4), torch.randn(5)
torch.manual_seed(0)
eager = f(x, y)
torch.manual_seed(0)
compiled = torch.compile(f, backend="aot_eager")(x, y)
print(eager, compiled, sep="\n")
torch.testing.assert_close(compiled, eager)
print("not reproduced: the compiled random draws match eager's")
