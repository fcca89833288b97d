"""KI-103: compiled torch.relu_ on a Tensor subclass returns a plain torch.Tensor where eager returns the subclass (exits 1 while the bug lives)"""
import torch


class TensorSub(torch.Tensor):
    pass


def f(x):
    return torch.relu_(x.as_subclass(TensorSub) * 2)  # t.relu_() keeps the subclass


x = torch.randn(3)
eager = f(x)
compiled = torch.compile(f, backend="aot_eager", fullgraph=True)(x)
print("eager:", type(eager).__name__, "compiled:", type(compiled).__name__)
assert type(compiled) is type(eager), f"compiled returns a {type(compiled).__name__}, eager a {type(eager).__name__}"
torch.testing.assert_close(compiled, eager)
print("not reproduced: the compiled output has eager's type")
