"""KI-146: a submodule's full backward pre-hook and hook never fire under torch.compile (eager and aot_eager) when
its input is an intermediate with a tensor hook, made in a nested module call after an earlier nested call also
hooked an intermediate; eager fires both, and the tensor hooks fire either way (raises while the bug lives)"""
import torch
import torch.nn as nn

calls = []


class Mlp(nn.Module):
    def forward(self, x):
        return x * 2


class Block(nn.Module):
    def __init__(self, hooked):
        super().__init__()
        self.mlp = Mlp()
        if hooked:
            self.mlp.register_full_backward_pre_hook(lambda m, go: calls.append("pre"))
            self.mlp.register_full_backward_hook(lambda m, gi, go: calls.append("post"))

    def forward(self, x):
        v0 = torch.sin(x)
        v0.register_hook(lambda g: calls.append("tensor"))  # a tensor hook on an intermediate
        return self.mlp(v0)


def run(compiled):
    calls.clear()
    a, b = Block(False), Block(True)
    f = (lambda x: (lambda h: h + b(h))(x + a(x)))
    (torch.compile(f, backend="eager") if compiled else f)(torch.randn(4, requires_grad=True)).sum().backward()
    return sorted(calls)


print("eager:", run(False), "| compiled:", run(True))
assert run(True) == run(False), "the module's backward hooks were dropped"
print("not reproduced: the compiled run calls every hook")
