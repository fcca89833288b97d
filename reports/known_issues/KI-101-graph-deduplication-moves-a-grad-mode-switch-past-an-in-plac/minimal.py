"""KI-101: graph deduplication moves a no_grad switch before an in-place write between deduplicated calls: the write escapes autograd, the gradient is wrong (exits 1 while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True  # False: matches eager


def f(x, y):
    for _ in range(3):
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            x = x + x.sin() + y
        y.mul_(-0.5)  # traced under grad; the pass moves no_grad before the first two
    return x + y


def grad_of_p(fn):
    p = torch.ones(3, 2, requires_grad=True)
    fn(torch.ones(3, 2), p * 1).sum().backward()
    return p.grad  # eager: (-0.5) ** 3 everywhere


torch.testing.assert_close(grad_of_p(torch.compile(f, backend="aot_eager")), grad_of_p(f))
print("not reproduced: compiled gradient matches eager")
