"""KI-006: graph deduplication fails 'stable topological sort failed' on regions under torch.autocast (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def f(y):
    outs = []
    for _ in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            outs.append(torch.split(y, 1, dim=-1)[0])
    return outs


torch.compile(f, backend="aot_eager")(torch.randn(2))
print("not reproduced: the compiled call ran")
