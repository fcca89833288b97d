"""KI-057: after a rank change, dedup of a block branching on x.shape[-1] hands AOTAutograd an int (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def block(x):
    return x * 2 if x.shape[-1] % 2 == 0 else x - 1


cf = torch.compile(lambda x: block(block(x)), backend="aot_eager")
cf(torch.randn(1, 1, 1, requires_grad=True))  # first compile runs
cf(torch.randn(2, 1, 1, 1, requires_grad=True))  # the dynamic recompile raises
print("not reproduced: the compiled call after the change ran")
