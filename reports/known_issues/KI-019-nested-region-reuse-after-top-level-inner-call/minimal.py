"""KI-019: a nested region reused after its inner region ran at top level fails: no attribute 'repeated_subgraphN.repeated_subgraphN' (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def inner(x):
    return torch.sin(x)


@torch.compiler.nested_compile_region
def outer(x):
    return inner(x)


f = lambda x: inner(x) + outer(x) + outer(x)  # outer(x) + outer(x) + inner(x) compiles
torch.compile(f, backend="aot_eager")(torch.randn(3, requires_grad=True))
print("not reproduced: the compiled call ran")
