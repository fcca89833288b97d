"""KI-110: torch.func.vmap of a nested_compile_region function, called twice in compiled code: RuntimeError: TransformType.Vmap (raises while the bug lives)"""
import torch


@torch.compiler.nested_compile_region  # without it, or with one vmap call, it matches eager
def block(x):
    return x.sin()


def f(h):
    return torch.func.vmap(block)(h) + torch.func.vmap(block)(h)


h = torch.randn(3, 4)
torch.testing.assert_close(torch.compile(f, backend="aot_eager")(h), f(h))
print("not reproduced: compiled vmap matches eager")
