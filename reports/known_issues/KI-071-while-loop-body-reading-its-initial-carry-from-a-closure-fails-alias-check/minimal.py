"""KI-071: while_loop whose body reads its initial carry from a closure fails the alias check on aot_eager (raises while the bug lives)"""
import torch
from torch._higher_order_ops import while_loop


def f(x):
    return while_loop(lambda i, u: i < 2, lambda i, u: (i + 1, x * 2), (torch.zeros((), dtype=torch.int64), x))[1]


torch.compile(f, backend="aot_eager")(torch.randn(1))  # RuntimeError: cond_fn might be aliasing the input or the output!
print("not reproduced: while_loop reading its initial carry from a closure compiles")
