"""KI-053: single-use invoke_subgraph inlining leaves a get_attr to a lost submodule alias subgraph_N_N (raises while the bug lives)"""
import torch

@torch.compiler.nested_compile_region
def inner(x):
    return torch.sin(x)

@torch.compiler.nested_compile_region
def mid(x):
    return inner(x) + 1

@torch.compiler.nested_compile_region
def outer(x):
    return inner(mid(x))  # mid and outer have one call site each: both get inlined

torch.compile(lambda x: outer(x), backend="aot_eager")(torch.randn(3))
print("not reproduced: the compiled call ran")
