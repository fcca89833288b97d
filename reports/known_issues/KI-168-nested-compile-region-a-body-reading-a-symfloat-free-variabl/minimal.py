"""nested_compile_region body reading a symbolic float (an unspecialized float input's .item()) as a free variable:
Dynamo's reuse-cache bookkeeping asserts 'Freevar has no source'. Exit 1 = reproduces."""
import sys
import torch


class C:
    pass


CFG = C()


@torch.compiler.nested_compile_region
def block(x):
    return x * CFG.p  # CFG.p is read as a free variable of the region body


def f(x, s):
    CFG.p = s  # s: a Python float, under dynamic=True a graph input read through .item() (a SymFloat)
    return block(x)


x = torch.randn(3)
expected = f(x, 0.25)  # eager: x * 0.25
try:
    out = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)(x, 0.25)
except AssertionError as e:
    if "Freevar has no source" in str(e):
        print("reproduced:", str(e)[:160])
        sys.exit(1)
    raise
print("not reproduced; matches eager:", torch.allclose(out, expected))
sys.exit(0)
