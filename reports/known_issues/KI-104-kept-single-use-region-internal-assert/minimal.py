"""KI-104: a kept single-use nested_compile_region under dynamic=True and inference_mode(False) fails: INTERNAL ASSERT FAILED in PythonFallbackKernel.cpp (raises while the bug lives)"""
import torch

torch._dynamo.config.inline_single_use_invoke_subgraph = False
S1 = 1.0  # a float read from a global (a literal 1.0 runs)


@torch.compiler.nested_compile_region
def block(x, s1):
    return s1 - (x + torch.rand_like(x))


def f(x):
    with torch.inference_mode(False):
        return block(x, S1)


torch.compile(f, backend="aot_eager", dynamic=True)(torch.randn(3))
print("not reproduced: the compiled call ran")
