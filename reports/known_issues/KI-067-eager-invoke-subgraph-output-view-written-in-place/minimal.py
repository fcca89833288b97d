"""KI-067: on the eager backend, a deduplicated region whose output view is written in place fails in InvokeSubgraphAutogradOp (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x, dim):
    x.sum(dim=dim)[..., :1].mul_(-1.0)
    return x * 2


f = lambda x: block(block(block(x, -1), -1), -2)
torch.compile(f, backend="eager")(torch.randn(2, 1, requires_grad=True))
print("not reproduced: the compiled call ran")
