"""KI-115: a nested_compile_region body reused for a call passing one tensor twice: IndexError in stamp_out_subgraph (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region
def block(x, y):
    return x + y


f = lambda x, y: block(x, y) + block(x, x)  # the second call reuses the body traced for distinct x, y
torch.compile(f, backend="aot_eager")(torch.randn(1), torch.randn(1))
print("not reproduced: the compiled call ran")
