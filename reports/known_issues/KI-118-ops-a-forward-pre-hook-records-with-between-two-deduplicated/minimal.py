"""KI-118: with inline_invoke_subgraph, graph deduplication moves the grad-mode switch past ops traced under no_grad: the output requires grad (exits 1 while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True  # False: matches eager
torch._dynamo.config.inline_invoke_subgraph = True  # False: matches eager


def mlp(x, w):
    return x.masked_fill(x > 0, 0.0) * w


def f(x, w0, w1):
    with torch.no_grad():
        return mlp(mlp(x, w0), w1)


x, w0, w1 = torch.randn(3, 1), torch.ones(1, requires_grad=True), torch.ones(1, requires_grad=True)
out = torch.compile(f, backend="aot_eager")(x, w0, w1)
print("eager requires_grad:", f(x, w0, w1).requires_grad, "compiled:", out.requires_grad)
assert not out.requires_grad, "computed under no_grad, yet the compiled output requires grad"
print("not reproduced: the compiled output does not require grad, as in eager")
