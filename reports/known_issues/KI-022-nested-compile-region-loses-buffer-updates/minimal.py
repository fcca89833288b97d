"""KI-022: batch_norm running-stat updates inside a nested_compile_region called twice are lost (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(3))
        self.register_buffer("var", torch.ones(3))

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return F.batch_norm(x, self.mean, self.var, training=True, momentum=0.1)


def f(block, x):
    return block(x) + block(x)


torch.manual_seed(0)
x = torch.randn(5, 3)
eager_block, compiled_block = Block(), Block()
eager = f(eager_block, x)
compiled = torch.compile(f, backend="aot_eager")(compiled_block, x)
torch.testing.assert_close(compiled, eager)  # the outputs agree
print("running mean, eager:", eager_block.mean, "compiled:", compiled_block.mean)
torch.testing.assert_close(compiled_block.mean, eager_block.mean)
print("not reproduced: the compiled call updates the running statistics")
