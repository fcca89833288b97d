"""KI-134: a graph break inside region_activation_memory_budget makes the compiled function raise (raises while the bug lives; entered directly, the budget raises RuntimeError '... can only be used inside a torch.compile region' instead)"""
import contextlib

import torch


def budget():  # as a model that also runs in eager enters it
    return torch.autograd.graph.region_activation_memory_budget(0.0) if torch.compiler.is_compiling() else contextlib.nullcontext()


def f(x):
    with budget():
        y = torch.sin(x)
        torch._dynamo.graph_break()
        return torch.cos(y)


torch.compile(f, backend="eager")(torch.randn(4))  # TypeError: 'function' object does not support the context manager protocol
print("not reproduced: the compiled call ran")
