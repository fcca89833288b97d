"""KI-160: a nested_compile_region module forward reused for a second instance ignores forward pre-hooks on that instance's submodule (needs an input requiring grad)."""
import sys
import torch
import torch.nn as nn



class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, 1))

    def forward(self, x):
        return x @ self.w


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return self.mlp(x)


torch.manual_seed(0)
a, b = Block(), Block()
f = torch.compile(lambda x: b(a(x)), backend="aot_eager")
x = torch.randn(1, 1, requires_grad=True)
f(x)  # compiles: b reuses the body traced for a
b.mlp.register_forward_pre_hook(lambda mod, args: (args[0] * 0.5,))
got, want = f(x), b(a(x))
print("compiled", got.item(), "eager", want.item())
sys.exit(0 if torch.allclose(got, want) else 1)
