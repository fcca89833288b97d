"""KI-056: a nested_compile_region given a Tensor subclass argument returns its outputs as that subclass in compiled code (exits 1 while the bug lives)"""
import torch


class TensorSub(torch.Tensor):
    pass


@torch.compiler.nested_compile_region
def block(x, y, z):
    return y > z  # x is not even used


def f(x, y, z):
    return block(x.as_subclass(TensorSub), y, z)


x, y, z = torch.randn(3), torch.randn(3), torch.randn(3)
eager = f(x, y, z)
compiled = torch.compile(f, backend="aot_eager", fullgraph=True)(x, y, z)
print("eager:", type(eager).__name__, "compiled:", type(compiled).__name__)
assert type(compiled) is type(eager), f"compiled returns a {type(compiled).__name__}, eager a {type(eager).__name__}"
torch.testing.assert_close(compiled, eager)
print("not reproduced: the compiled output has eager's type")
