"""Repro (torch only, CPU): a repeated region (torch.compiler.nested_compile_region, or
graph deduplication with `python repro.py dedup`) around `x + linear(x.permute(0,2,3,1)).permute(0,3,1,2)`,
followed by a channels-first LayerNorm and a conv, compiled with backend="inductor", forward + backward.
Inductor's backward compile fails: ValueError: Cannot view a tensor with shape [2, 4, 4, 32] and
strides (512, 32, 128, 1) as a tensor with shape (32, 32).
Mechanism: inductor's view_to_reshape pass rewrites aten.view -> aten.reshape in the invoke_subgraph
bodies by changing node.target without recompiling those GraphModules; FakeTensorProp runs the first
call of a subgraph node by node (reshape: fine) but later calls through the module's stale generated
code (aten.view). The forward saved activations come back from inductor with other strides
(layout optimisation), so the backward subgraph's incoming gradient is no longer viewable.
Eager, and the same compile without the region, are fine.
Exit 1: reproduced; 0: not; 2: this torch has no nested_compile_region."""
import os
import sys
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()  # private cache: never hit a stale artifact
import torch
import torch.nn.functional as F

N, C, S = 2, 32, 4
dedup = sys.argv[1:] == ["dedup"]


def block(x, w):
    return x + F.linear(x.permute(0, 2, 3, 1), w).permute(0, 3, 1, 2)


def f(blk):
    def run(x, w1, w2, ln_w, conv_w):
        x = blk(blk(x, w1), w2)
        x = F.layer_norm(x.permute(0, 2, 3, 1), (C,), ln_w).permute(0, 3, 1, 2)  # channels-first LayerNorm
        return F.conv2d(x, conv_w, stride=2)
    return run


if not dedup and not hasattr(torch.compiler, "nested_compile_region"):
    print(f"repro error: torch {torch.__version__} has no torch.compiler.nested_compile_region")
    sys.exit(2)
torch.manual_seed(0)
args = [t.requires_grad_() for t in (torch.randn(N, C, S, S), torch.randn(C, C), torch.randn(C, C),
                                     torch.randn(C), torch.randn(C, C, 2, 2))]
f(block)(*args).sum().backward()  # eager: fine
torch.compile(f(block), backend="inductor", fullgraph=True)(*args).sum().backward()  # no region, no dedup: fine
torch._dynamo.reset()
if dedup:
    torch._dynamo.config.use_graph_deduplication = True
    fn = f(block)
else:
    fn = f(torch.compiler.nested_compile_region(block))
try:
    torch.compile(fn, backend="inductor", fullgraph=True)(*args).sum().backward()
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    sys.exit(1)
print(f"not reproduced ({torch.__version__})")
sys.exit(0)
