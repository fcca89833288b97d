"""KI-059: Dynamo asserts on a second while_loop whose body reads a grad-requiring tensor (raises while the bug lives)"""
import torch
from torch._higher_order_ops import while_loop


def f(x, y):
    i0 = torch.zeros((), dtype=torch.int64)
    h = while_loop(lambda i, u: i < 2, lambda i, u: (i + 1, u * y), (i0, x))[1]
    h = while_loop(lambda i, u: i < 2, lambda i, u: (i + 1, u * y), (i0, h))[1]
    return h


x, y = torch.randn(2, 1), torch.randn(2, 1, requires_grad=True)
torch.compile(f, backend="aot_eager")(x, y)  # AssertionError: Source of ... is None when lifting it to input of top-level
print("not reproduced: two while_loops reading a grad-requiring tensor compile")
