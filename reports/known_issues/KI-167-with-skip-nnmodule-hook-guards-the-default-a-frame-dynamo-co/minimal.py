"""KI-167: a forward pre-hook on a submodule, registered before compiling, is never called: the frame compiled for
another instance (no hooks: its empty hook dict unguarded under skip_nnmodule_hook_guards) serves it.
Exit 1 while it reproduces; 0 with torch._dynamo.config.skip_nnmodule_hook_guards = False."""
import sys
import torch
import torch.nn as nn

calls = []


class Inner(nn.Module):
    def forward(self, x):
        return x + 1


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        x = x * 2
        torch._dynamo.graph_break()  # the finding: x[x > 0] (a data-dependent size) does the same
        return self.inner(x)


a, b = Outer(), Outer()
b.inner.register_forward_pre_hook(lambda mod, args: calls.append("b.inner"))
model, x = nn.Sequential(a, b), torch.randn(3)
model(x)
eager, calls[:] = list(calls), []
torch.compile(model, backend="eager")(x)
print("eager:", eager, "compiled:", calls)
sys.exit(1 if calls != eager else 0)
