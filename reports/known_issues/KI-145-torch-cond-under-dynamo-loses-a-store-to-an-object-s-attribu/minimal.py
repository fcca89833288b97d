"""KI-145: torch.cond under Dynamo loses a store to an object's attribute made after a branch read it (after an
earlier store in the same frame): later reads see the old value, and the attribute is left at it; the same
function with a nested_compile_region in the cond's place is right (raises while the bug lives)"""
import torch


class Holder:
    def __init__(self):
        self.dim = 0


H = Holder()


def block(x):
    return x + torch.amax(x, dim=H.dim).mean()


def f(x):
    H.dim = 0
    h = torch.cond(x.sum() > 0, block, block, (x,))
    H.dim = 1  # lost: the next read, and the attribute after the call, keep 0
    return block(h), H.dim


torch.manual_seed(0)
x = torch.randn(3, 5)
expected, expected_dim = f(x)
H.dim = 0
got, got_dim = torch.compile(f, backend="eager", fullgraph=True)(x)
print("H.dim returned: eager", expected_dim, "compiled", got_dim, "| left at", H.dim)
assert got_dim == expected_dim == H.dim, "the store after the cond was lost"
torch.testing.assert_close(got, expected)
print("not reproduced: the compiled call sees the store")
