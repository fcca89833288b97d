"""KI-020: graph deduplication moves regions past torch.set_default_dtype: torch.full runs in float32 (exits 1 while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    # 2**24 + 1 is exact in float64 (the default dtype here), rounds to 2**24 in float32: +1 vs +0
    return x + (torch.full(x.shape, 16777217.0) - 16777216).type_as(x)


def f(h):
    for _ in range(3):
        torch.set_default_dtype(torch.float64)
        h = h + block(h)
        torch.set_default_dtype(torch.float32)
    return h


x = torch.zeros(4, 8)
expected = f(x)  # 7.0 everywhere
actual = torch.compile(f, backend="eager")(x)  # 0.0 with deduplication
torch.testing.assert_close(actual, expected)
print("not reproduced: deduplicated regions keep their default dtype")
