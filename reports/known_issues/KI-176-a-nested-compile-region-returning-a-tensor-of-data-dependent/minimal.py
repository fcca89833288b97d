"""KI-176: a nested_compile_region returning a tensor of data-dependent size (r[r > 0] under
capture_dynamic_output_shape_ops), called twice, with a backward: AOTAutograd's min-cut partitioner fails
'Node sym_size_int_N was invalid, but is output'. No deduplication; one call, or no decorator, runs.
Exit 1: reproduced."""
import sys

import torch

torch._dynamo.config.capture_dynamic_output_shape_ops = True


@torch.compiler.nested_compile_region
def block(x):
    r = x.sin()
    return r[r > 0]


def f(x):
    return block(x), block(x * 2)


x = torch.randn(8, requires_grad=True)
try:
    torch.compile(f, backend="aot_eager", fullgraph=True)(x)
except Exception as e:  # noqa: BLE001
    print(f"KI-176 reproduced: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
print("not reproduced")
