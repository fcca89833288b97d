"""KI-149: a nested_compile_region body with a data-dependent output shape (nonzero) is a hard compile error, not a fallback (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def block(x):
    return x.nonzero().sum() + x  # nonzero: an output shape that depends on x's values


torch.compile(lambda x: block(x) * 2, backend="aot_eager")(torch.randn(3))  # eager (and no decorator) runs it
print("not reproduced: the compiled call ran")
