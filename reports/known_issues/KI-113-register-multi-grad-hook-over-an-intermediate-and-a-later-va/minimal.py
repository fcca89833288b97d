"""KI-113: register_multi_grad_hook over an intermediate and a later value in compiled code: under aot_eager the intermediate's gradient never comes (exits 1 while the bug lives)"""
import torch

seen = []


def f(x):
    a = x.sin()
    b = a.cos()
    torch.autograd.graph.register_multi_grad_hook((a, b), lambda grads: seen.append([g is None for g in grads]))
    return b


x = torch.randn(3, requires_grad=True)
f(x).sum().backward()
torch.compile(f, backend="aot_eager")(x).sum().backward()
eager, compiled = seen
print("which gradients the hook got as None, eager:", eager, "compiled:", compiled)
assert compiled == eager, f"grad is None, compiled: {compiled}, eager: {eager}"
print("not reproduced: the hook gets both gradients")
