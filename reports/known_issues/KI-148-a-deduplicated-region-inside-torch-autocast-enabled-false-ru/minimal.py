"""KI-148: a deduplicated region inside torch.autocast("cpu", enabled=False) runs under an outer bfloat16 autocast:
it returns bfloat16 and the matmul after it (float32 weight) raises; eager and deduplication off run"""
import torch

torch._dynamo.config.use_graph_deduplication = True
w = [torch.randn(2, 2, requires_grad=True) for _ in range(4)]

def f(x):
    for i in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
            h = torch.sin(x @ w[i]) + 1.0  # the same region twice: deduplicated
            x = h @ w[2 + i] if i == 0 else (h.unsqueeze(0) @ w[2 + i]).squeeze(0)  # not alike: left as it is
    return x

x = torch.randn(2, requires_grad=True)
with torch.autocast("cpu", dtype=torch.bfloat16):
    f(x)  # eager: float32 throughout, runs
    torch.compile(f, backend="aot_eager", fullgraph=True)(x)
print("not reproduced: the compiled call runs")
