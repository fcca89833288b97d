"""KI-175: a nested_compile_region called a second time with a tensor of data-dependent size (x[x > 0] under
capture_dynamic_output_shape_ops): the reuse check compares the new input's sizes with the cached body's and
guards on Eq(u1, u0): GuardOnDataDependentSymNode. No deduplication; backend eager alike. Exit 1: reproduced."""
import torch

torch._dynamo.config.capture_dynamic_output_shape_ops = True


@torch.compiler.nested_compile_region
def block(x, given):
    return x + given.sum()


def f(x):
    h = block(x, x[x > 0])
    return block(h, h[h > 0])


torch.compile(f, backend="eager", fullgraph=True)(torch.randn(4))  # raises
print("not reproduced")
