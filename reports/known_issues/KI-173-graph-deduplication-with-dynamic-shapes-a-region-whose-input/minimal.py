"""KI-173: a deduplicated region whose input's size symbol is later unified with another input's: 'Node add_N was invalid, but is output' (exit 1 while it reproduces)"""
import sys
import torch
torch._dynamo.config.use_graph_deduplication = True
w = torch.nn.Parameter(torch.randn(5, 5))  # something must require grad: the joint graph's partition fails
def block(x):
    return x + torch.nn.functional.linear(x, w) * 2  # a 3-d linear views x as [2*s, 5]: it needs x's size
def f(x, y):
    a = block(x)
    return y + block(x) + a  # unifies x's size symbol with y's; the region's input keeps x's
x, y = torch.randn(4, 2, 5), torch.randn(4, 2, 5)
torch._dynamo.maybe_mark_dynamic(x, 0); torch._dynamo.maybe_mark_dynamic(y, 0)  # no duck sizing
try:
    torch.compile(f, backend="aot_eager")(x, y)
except Exception as e:
    print(f"{type(e).__name__}: {' '.join(str(e).splitlines()[:2])}", file=sys.stderr); sys.exit(1)
print("not reproduced: compiles"); sys.exit(0)
