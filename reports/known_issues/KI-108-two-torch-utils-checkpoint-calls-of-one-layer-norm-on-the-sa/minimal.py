"""KI-108: two torch.utils.checkpoint calls of one layer_norm on the same input fail AOTAutograd's partitioner (CSE merges them) (raises while the bug lives)"""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

# Deduplication on or off alike; passes with torch._functorch.config.cse = False.


def f(x):
    a = checkpoint(F.layer_norm, x, (3,), use_reentrant=False)
    b = checkpoint(F.layer_norm, x, (3,), use_reentrant=False)
    return a, b  # both returned: with `return a + b` it compiles


x = torch.randn(2, 3, requires_grad=True)
a, b = torch.compile(f, backend="aot_eager")(x)
(a + b).sum().backward()
print("not reproduced: compiled and partitioned")
