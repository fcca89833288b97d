"""KI-116: eager torch.cond recomputes its branch for the backward with a fresh RNG draw: a dropout inside gets another mask, the gradient is wrong (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F


def branch(x):
    return F.dropout(x, 0.5) * 2


def grad_of_x(fn):
    torch.manual_seed(0)
    x = torch.ones(16, requires_grad=True)
    fn(x).sum().backward()
    return x.grad


expected = grad_of_x(branch)  # the branch called plainly: zeros where the mask dropped
actual = grad_of_x(lambda x: torch.cond(x.sum() > 0, branch, lambda u: branch(u * 0.5), (x,)))
torch.testing.assert_close(actual, expected)
print("not reproduced: torch.cond's gradient matches the plain branch")
