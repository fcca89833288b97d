"""KI-060: while_loop's backward gives a wrong parameter gradient when the carried value needs no grad (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F
from torch._higher_order_ops import while_loop

torch.manual_seed(0)
w, b, x = torch.ones(3, requires_grad=True), torch.randn(3, requires_grad=True), torch.randn(3)  # x: no grad


def body(i, u):
    return i + 1, F.layer_norm(u, (3,), w, b)


h = while_loop(lambda i, u: i < 2, body, (torch.zeros((), dtype=torch.int64), x))[1]
h.backward(torch.tensor([1.0, -2.0, 3.0]))
actual, w.grad = w.grad, None
F.layer_norm(F.layer_norm(x, (3,), w, b), (3,), w, b).backward(torch.tensor([1.0, -2.0, 3.0]))  # the Python loop
torch.testing.assert_close(actual, w.grad)
print("not reproduced: while_loop's parameter gradient matches the Python loop")
