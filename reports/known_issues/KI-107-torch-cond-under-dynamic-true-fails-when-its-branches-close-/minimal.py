"""KI-107: torch.cond under dynamic=True whose branches close over a float argument: the SymFloat operand is rejected, RuntimeError when making fake tensor call (raises while the bug lives)"""
import torch


def f(x, p=-0.5):
    return torch.cond(x.sum() > 0, lambda t, p=p: t.clamp(min=p), lambda t, p=p: t.clamp(min=p) * 0.5, (x,))


x = torch.randn(3, 2)
torch.testing.assert_close(torch.compile(f, backend="eager", dynamic=True)(x), f(x))
print("not reproduced: compiled cond matches eager")
