"""KI-134: a graph break inside region_activation_memory_budget makes the compiled function raise (raises while the bug lives)"""
import torch


def f(x):
    with torch.autograd.graph.region_activation_memory_budget(0.0):
        y = torch.sin(x)
        torch._dynamo.graph_break()
        return torch.cos(y)


x = torch.randn(4)
torch.testing.assert_close(torch.compile(f, backend="eager")(x), torch.cos(torch.sin(x)))  # RuntimeError: ... can only be used inside a torch.compile region
print("not reproduced: the compiled call matches eager")
