"""KI-111: a gradient hook on an intermediate of a block called twice under graph deduplication: KeyError: example_value (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    y = x.abs()
    y.register_hook(lambda g: g * 2)
    return y.relu()


x, t = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
torch.compile(lambda x, t: (block(x), block(t)), backend="aot_eager")(x, t)
print("not reproduced: the compiled call ran")
