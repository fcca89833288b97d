"""KI-137: a tensor hook on a tensor no gradient reaches is called (with None) under torch.compile, never in eager (raises while the bug lives)"""
import torch

calls = []


def f(x):
    a = x.sin()
    b = x.cos()  # never reaches the loss
    b.register_hook(lambda g: calls.append(g))  # a graph break: b becomes an output of the first graph
    return a


x = torch.randn(3, requires_grad=True)
torch.compile(f, backend="aot_eager")(x).sum().backward()
assert calls == [], f"the hook was called {len(calls)} time(s) under torch.compile, with {calls}; eager never calls it"
print("not reproduced: the hook was not called, as in eager")
