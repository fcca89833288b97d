"""KI-093: turbine_cpu's entry recompiled for new input values ignores a float graph input (x - s gives x) (exits 1 while the bug lives)"""
import torch

def f(x):
    s = x.mean().item()  # graph break: s reaches the graph after it
    return x - s

compiled = torch.compile(f, backend="turbine_cpu")
compiled(torch.tensor([1.0, 3.0]))  # right: s = 2.0 is a constant of the first graph
x = torch.tensor([2.0, 6.0])  # new values: s changes, that graph recompiles with s as a float input
# eager: [-2., 2.]; turbine_cpu: [2., 6.] (s read as 0); right with torch._dynamo.config.specialize_float = True
torch.testing.assert_close(compiled(x), f(x))
print("not reproduced: the recompiled entry matches eager")
