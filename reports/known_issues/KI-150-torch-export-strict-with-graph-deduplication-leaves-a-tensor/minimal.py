"""KI-150: torch.export (strict) with graph deduplication leaves a tensor constant of a deduplicated subgraph unlifted, a buffer of the exported module (raises while the bug lives)"""
import torch


class M(torch.nn.Module):
    def forward(self, x):
        outs = []
        for _ in range(2):
            outs.append((x[[0, -1]].sin() + 1).cos())  # a list index: a tensor constant in each region
        return outs


torch._dynamo.config.use_graph_deduplication = True  # without it: lifted to ep.constants, no buffer
ep = torch.export.export(M(), (torch.randn(4, 3),), strict=True)
extra = [n for n, _ in ep.module().named_buffers()]
assert not extra, f"the exported module has buffers M has not: {extra} (ep.constants: {list(ep.constants)})"
print("not reproduced: no buffer M has not")
