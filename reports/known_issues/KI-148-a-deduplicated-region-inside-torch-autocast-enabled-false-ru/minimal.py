"""KI-148: with use_graph_deduplication, a region called twice inside torch.autocast('cpu', enabled=False) runs under
the ambient autocast of an outer torch.autocast(dtype=bfloat16) once it is an invoke_subgraph call: the output is
bfloat16 where eager (and deduplication off) keep float32 (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True
w = [torch.randn(1, 1, requires_grad=True) for _ in range(4)]


def f(x):
    for i in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
            x = torch.sin(x @ w[2 * i]) @ w[2 * i + 1] + 1.0
    return x


x = torch.randn(1, requires_grad=True)
with torch.autocast("cpu", dtype=torch.bfloat16):
    expected, got = f(x).dtype, torch.compile(f, backend="aot_eager", fullgraph=True)(x).dtype
print("eager:", expected, "| compiled:", got)
assert got == expected, "the deduplicated region ran under the outer autocast"
print("not reproduced: the compiled dtype matches eager")
