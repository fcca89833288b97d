"""KI-171: graph deduplication hoists the switches of a no_grad bracket after two deduplicated calls above them: an op traced under no_grad runs with grad (its output requires grad). Exit 1 while it reproduces."""
import sys

import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x, y):
    return x + (y * 2).mean()


def f(x, y):
    h = torch.tanh(block(block(x, y), y))
    with torch.no_grad():
        last = block(h, y)
    return h, last


x, y = torch.randn(3, 4, requires_grad=True), torch.randn(4)
eager = [o.requires_grad for o in f(x, y)]
compiled = [o.requires_grad for o in torch.compile(f, backend="aot_eager", fullgraph=True)(x, y)]
print("requires_grad eager:", eager, "compiled:", compiled)
sys.exit(1 if eager != compiled else 0)
