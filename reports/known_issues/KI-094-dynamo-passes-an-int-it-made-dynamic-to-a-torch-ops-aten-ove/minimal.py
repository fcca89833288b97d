"""KI-094: Dynamo passes a dynamic int as a bare SymInt to an aten overload's int[1] dim, which its schema rejects (raises while the bug lives)"""
import torch


def f(y, d):
    return torch.ops.aten.var.correction(y, d, correction=0, keepdim=True)


cf = torch.compile(f, backend="aot_eager")
y = torch.randn(2, 3)
cf(y, 0)  # first compile runs
f(y, -1)  # eager accepts a bare int for int[1]
cf(y, -1)  # the recompile with d dynamic raises
print("not reproduced: the compiled call after the change ran")
