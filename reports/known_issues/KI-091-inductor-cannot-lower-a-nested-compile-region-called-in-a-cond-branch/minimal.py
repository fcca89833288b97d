"""KI-091: inductor cannot lower torch.cond whose branches call a nested_compile_region: AssertionError both a fallback and a decomp for same op (raises while the bug lives)"""
import torch
import torch.nn.functional as F


@torch.compiler.nested_compile_region
def block(x):
    return F.gelu(x)


def f(h):
    return torch.cond(h.sum() > 0, lambda t: block(t), lambda u: block(u * 0.5), (h,))


x = torch.randn(4, 3)
torch.testing.assert_close(torch.compile(f, backend="inductor")(x), f(x))
print("not reproduced: compiled cond matches eager")
