"""KI-154: torch 2.11 inductor: nested nested_compile_region with a bf16->fp32 cast raises 'both a fallback and a decomp for same op: aten._to_copy'"""
import torch

@torch.compiler.nested_compile_region
def inner(x):
    return x.float()

@torch.compiler.nested_compile_region
def outer(x):
    return inner(x)

torch.compile(outer, backend="inductor", fullgraph=True)(torch.randn(4, dtype=torch.bfloat16))
