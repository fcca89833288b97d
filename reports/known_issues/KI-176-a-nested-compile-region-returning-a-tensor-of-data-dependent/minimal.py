"""KI-176: a nested_compile_region returning a tensor of data-dependent size (r[r > 0], captured), called
twice, with a backward: the partitioner fails 'Node sym_size_int_N was invalid, but is output'. No
deduplication; one call, or no decorator, runs. Exit 1: reproduced."""
import torch

torch._dynamo.config.capture_dynamic_output_shape_ops = True


@torch.compiler.nested_compile_region
def block(x):
    r = x.sin()
    return r[r > 0]


def f(x):
    return block(x), block(x * 2)


torch.compile(f, backend="aot_eager", fullgraph=True)(torch.randn(8, requires_grad=True))  # raises
print("not reproduced")
