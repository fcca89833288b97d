"""KI-068: dedup of two masked_select(w, w > 0).sum() calls with unbacked shapes fails AOTAutograd partitioning (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True
w = torch.nn.Parameter(torch.randn(5))


def block(x, w):
    return w + torch.masked_select(w, w > 0).sum()


f = torch.compile(lambda x: block(block(x, w), w), backend="aot_eager")
f(torch.randn(5))  # AssertionError: Node sym_size_int_N was invalid, but is output
print("not reproduced: deduplicated masked_select blocks compile")
