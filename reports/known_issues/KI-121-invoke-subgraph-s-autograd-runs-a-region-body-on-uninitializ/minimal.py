"""KI-121: with deduplication, invoke_subgraph's autograd runs a region body on uninitialized inputs when the graph runs eagerly: cholesky raises (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    return torch.linalg.cholesky(x).sin()


def f(x):
    return block(x), block(x)


A = torch.eye(8).requires_grad_()
compiled = torch.compile(f, backend="eager")(A)  # _LinAlgError: ... not positive-definite (garbage inputs)
torch.testing.assert_close(compiled, f(A))
print("not reproduced: the compiled call matches eager")
