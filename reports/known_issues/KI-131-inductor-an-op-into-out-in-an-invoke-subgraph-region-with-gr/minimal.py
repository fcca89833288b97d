"""KI-131: inductor cannot compile an op spelled into out= inside an invoke_subgraph region whose inputs require grad: TypeError: add() got an unexpected keyword argument 'out' (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(a, x):
    return torch.add(a, a, out=torch.empty(())) + x.sin()


def f(a, x):
    return block(a, x), block(a, x)


a, x = torch.tensor(1.0), torch.randn(4, requires_grad=True)
compiled = torch.compile(f, backend="inductor")(a, x)  # BackendCompilerFailed: TypeError: add() got an unexpected keyword argument 'out'
torch.testing.assert_close(compiled, f(a, x))
print("not reproduced: the compiled call matches eager")
