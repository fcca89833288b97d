"""Torch-only repro: backend="inductor", forward+backward, CPU. Two residual blocks
relu(conv(relu(conv(h))) + h); the region (relu -> conv) is wrapped in
torch.compiler.nested_compile_region, or found by use_graph_deduplication in plain
repeats, so each block's first conv stays in the OUTER graph. Inductor's CPU layout optimization makes the compiled forward
save one call's activations channels_last and the other's contiguous; AOT autograd
restrides the backward placeholders to those real strides, and the backward's
post-grad FakeTensorUpdater then finds the one shared backward subgraph called with
inconsistent strides -> "AssertionError: subgraph args must have consistent values!"
(torch/_inductor/fx_utils.py, FakeTensorUpdater.incremental_update).

Usage: python repro.py [region|dedup] [nolayout] [fwd]
  region (default): nested_compile_region; dedup: plain repeats + use_graph_deduplication
  nolayout: torch._inductor.config.layout_optimization = False (control)
  fwd: forward only, no backward (control)
Exit 1 + 'REPRODUCED (<ver>): <msg>' on crash; 0 'not reproduced' otherwise;
2 if this torch has no nested_compile_region (region mode)."""
import sys

import torch
import torch.nn.functional as F

args = sys.argv[1:]
mode = "dedup" if "dedup" in args else "region"
torch._dynamo.config.use_graph_deduplication = mode == "dedup"
if "nolayout" in args:
    torch._inductor.config.layout_optimization = False


def g(t, w):  # the repeated region
    return F.conv2d(F.relu(t), w, padding=1)


if mode == "region":
    if not hasattr(torch.compiler, "nested_compile_region"):
        print(f"repro error: torch {torch.__version__} has no torch.compiler.nested_compile_region")
        sys.exit(2)
    g = torch.compiler.nested_compile_region(g)


def f(x, w0, w1, w2, w3):  # two residual blocks; the first conv of each is outside the region
    h = F.relu(g(F.conv2d(x, w0, padding=1), w1) + x)
    return F.relu(g(F.conv2d(h, w2, padding=1), w3) + h).sum()


torch.manual_seed(0)
x = torch.randn(2, 8, 8, 8)
ws = [torch.randn(8, 8, 3, 3, requires_grad=True) for _ in range(4)]
f(x, *ws).backward()  # eager: fine
try:
    out = torch.compile(f, backend="inductor")(x, *ws)
    if "fwd" not in args:
        out.backward()
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    sys.exit(1)
print(f"not reproduced ({torch.__version__}) [{mode}{' ' + ' '.join(a for a in args if a != mode) if args else ''}]")
sys.exit(0)
