"""KI-030: a nested_compile_region forward reused for a second module instance has no guard on its attributes: changing one reuses the stale graph (exits 1 while the bug lives)"""
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.s0 = 2.0

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return torch.sin(x) * self.s0


layers = torch.nn.ModuleList([Block(), Block()])


def f(x):
    for layer in layers:
        x = layer(x)
    return x


compiled_f = torch.compile(f, backend="aot_eager")
x = torch.randn(4)
compiled_f(x)
layers[1].s0 = 3.0  # layers[0].s0 would recompile
torch.testing.assert_close(compiled_f(x), f(x))  # stale: still multiplies by 2.0
print("not reproduced: the change of layers[1].s0 recompiles")
