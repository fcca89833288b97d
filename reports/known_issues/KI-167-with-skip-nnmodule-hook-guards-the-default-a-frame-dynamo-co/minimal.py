"""Forward pre-hook on a submodule skipped under torch.compile (backend='eager').

Outer.forward graph-breaks, so Dynamo compiles Outer.forward (its resume function) as its own frame,
one cache shared by every Outer instance. The frame compiled for `a` (whose inner module has no hook)
got only an EMPTY_NN_MODULE_HOOKS_DICT guard on a.inner._forward_pre_hooks, which is skipped while
torch._dynamo.config.skip_nnmodule_hook_guards is True (the default); so the entry is reused for `b`,
whose inner module has a hook registered before any compile, and the hook never runs.
Exit 1: reproduced (hook call missing); 0: compiled calls match eager."""
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


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = Outer(), Outer()
        self.b.inner.register_forward_pre_hook(lambda mod, args: calls.append("b.inner"))

    def forward(self, x):
        return self.b(self.a(x))


model, x = Model(), torch.randn(3)
model(x)
eager, calls[:] = list(calls), []
torch.compile(model, backend="eager")(x)
print("eager:", eager, "compiled:", calls)
sys.exit(1 if calls != eager else 0)
