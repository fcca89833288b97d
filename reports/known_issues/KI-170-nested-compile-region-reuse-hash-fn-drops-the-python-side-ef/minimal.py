"""KI-170: nested_compile_region(reuse_hash_fn=...) drops the side effects of a call its key reuses: a forward hook on a submodule in the body runs for the traced call only. Exit 1 while it reproduces (0 without reuse_hash_fn)."""
import sys

import torch
import torch.nn as nn

CALLS = []


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)

    @torch.compiler.nested_compile_region(reuse_hash_fn=lambda *a, **k: 0)
    def forward(self, x):
        return self.inner(x).relu()


m = Outer()
m.inner.register_forward_hook(lambda mod, args, out: CALLS.append("hook"))
two = lambda x: (m(x), m(x))  # noqa: E731
x = torch.randn(2, 3)
two(x)
eager, CALLS[:] = list(CALLS), []
torch.compile(two, backend="aot_eager")(x)
print("eager:", eager, "compiled:", CALLS)
sys.exit(1 if CALLS != eager else 0)
