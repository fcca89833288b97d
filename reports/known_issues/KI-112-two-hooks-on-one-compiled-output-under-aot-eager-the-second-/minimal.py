"""KI-112: two hooks on one compiled output: under aot_eager the second hook sees the gradient before the first hook's change (exits 1 while the bug lives)"""
import torch

seen = []


def f(x):
    y = x.sin()
    y.register_hook(lambda g: g * 2)
    y.register_hook(lambda g: seen.append(g.clone()))  # hooks run in order, each given the previous result
    return y


x = torch.ones(3, requires_grad=True)
f(x).backward(torch.ones(3))
torch.compile(f, backend="aot_eager")(x).backward(torch.ones(3))
eager, compiled = seen
print("second hook saw, eager:", eager, "compiled:", compiled)
torch.testing.assert_close(compiled, eager)
print("not reproduced: the second hook sees the first hook's result")
