"""KI-168: a nested_compile_region body reading a SymFloat free variable (an unspecialized float's .item(), stored on an object) crashes Dynamo: AssertionError: Freevar has no source (raises while the bug lives)"""
import torch


CFG = type("C", (), {})()


@torch.compiler.nested_compile_region
def block(x):
    return x * CFG.p  # a free variable of the body; CFG.p is set by f from a float argument (a SymFloat here)


def f(x, s):
    CFG.p = s
    return block(x)


torch.compile(f, backend="eager", dynamic=True, fullgraph=True)(torch.randn(3), 0.25)
