"""KI-144: nested_compile_region's reuse drops repeated outputs: (a, a, b) comes back (a, b), a silent wrong result;
(a, a) a 1-tuple, and got[1] raises an IndexError reported as "Unsupported: Observed exception" (raises while it lives)"""
import torch
@torch.compiler.nested_compile_region
def three(x):
    a = x.sin()
    return a, a, x.cos()
@torch.compiler.nested_compile_region
def two(x):
    a = x.sin()
    return a, a
def f(x):
    three(x)  # traced, saved in the reuse cache
    return three(x)[1]  # stamped out from the cache as (sin, cos): [1] is cos
def g(x):
    two(x)
    return two(x)[1]  # a 1-tuple from the cache: IndexError (eager: sin)
x = torch.randn(3)
print("compiled three(x)[1] is sin:", torch.equal(torch.compile(f, backend="eager")(x), x.sin()))  # False
torch.compile(g, backend="eager", fullgraph=True)(x)  # raises Unsupported: Observed exception
