"""KI-158: graph deduplication places region calls made after torch.autocast brackets inside the last one: their bmm runs in bfloat16 (exit 1 when dedup on differs from off)"""
import sys
import torch
import torch._dynamo


def block(x, w):
    return torch.bmm(x.reshape(-1, 3, 4), w).reshape(2, 3, 4) / x + 12.0


def f(x, *ws):
    h = x
    for w in ws[:3]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = block(h, w)
    return [block(h, w) for w in ws[3:]]


def run(dedup):
    torch._dynamo.reset()
    torch._dynamo.config.use_graph_deduplication = dedup
    torch.manual_seed(0)
    args = [torch.randn(2, 4, 3).transpose(-1, -2)] + [torch.randn(2, 4, 4) / 2 for _ in range(7)]
    return torch.compile(f, backend="eager")(*args)


off, on = run(False), run(True)
bad = [i for i, (a, b) in enumerate(zip(off, on)) if a.dtype != b.dtype or not torch.equal(a, b)]
for i in bad:
    print(f"output {i}: max abs diff {(off[i].double() - on[i].double()).abs().max():.3g} (dedup on vs off)")
sys.exit(1 if bad else 0)
