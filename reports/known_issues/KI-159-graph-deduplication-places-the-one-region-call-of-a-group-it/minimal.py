"""KI-159: dedup places a region call past torch._C._set_grad_enabled(False), pinned by an autocast bracket, then inlines it as single-use: h1 loses requires_grad"""
import sys, torch, torch._dynamo
torch._dynamo.config.use_graph_deduplication = "--nodedup" not in sys.argv
torch._dynamo.config.inline_single_use_invoke_subgraph = "--noinline" not in sys.argv
AUTOCAST = "--noautocast" not in sys.argv
NOGRAD = "--nograd" not in sys.argv
import contextlib
def blk(x, s):
    return (x + x.to(s).type_as(x)) * 2.0
def f(x):
    h = x + blk(x, torch.float32)
    h1 = h + blk(h, torch.bfloat16)
    with (torch.no_grad() if NOGRAD else contextlib.nullcontext()), \
         (torch.autocast("cpu", dtype=torch.bfloat16) if AUTOCAST else contextlib.nullcontext()):
        h2 = blk(h1, torch.float64)
    return h1, h2
x = torch.randn(3, requires_grad=True)
e = f(x)
c = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)(x)
print("eager requires_grad", [t.requires_grad for t in e], "compiled", [t.requires_grad for t in c])
sys.exit(1 if [t.requires_grad for t in e] != [t.requires_grad for t in c] else 0)
