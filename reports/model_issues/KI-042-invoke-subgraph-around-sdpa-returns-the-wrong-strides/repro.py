"""Repro (torch only): invoke_subgraph (a nested_compile_region, or what graph
deduplication makes of T5's repeated attention) around CPU scaled_dot_product_attention
whose attn_mask requires grad, with aot_eager, forward and backward. The outer
graph assumes the region's output has the fused CPU kernel's strides; the
partitioned forward body takes the math path (the mask requires grad) and
returns a contiguous tensor, so the outer ``transpose(1, 2).contiguous().view``
(``.contiguous()`` traced as a no-op) fails at run time. Eager, and the same
function without the region, are fine. Exit 1: reproduced; 0: not; 2: this torch
has no nested_compile_region."""
import sys

import torch
import torch.nn.functional as F

B, H, S, D = 2, 4, 8, 8


def attn(q, bias):
    return F.scaled_dot_product_attention(q, q, q, attn_mask=bias * 2)


def f(region):
    def run(x, bias):
        for _ in range(2):
            q = x.view(B, S, H, D).transpose(1, 2)
            x = region(q, bias).transpose(1, 2).contiguous().view(B, S, H * D)
        return x
    return run


if not hasattr(torch.compiler, "nested_compile_region"):
    print(f"repro error: torch {torch.__version__} has no torch.compiler.nested_compile_region")
    sys.exit(2)
torch.manual_seed(0)
x = torch.randn(B, S, H * D, requires_grad=True)
bias = torch.randn(B, H, S, S, requires_grad=True)
f(attn)(x, bias).sum().backward()  # eager: fine
torch.compile(f(attn), backend="aot_eager", fullgraph=True)(x, bias).sum().backward()  # no region: fine
torch._dynamo.reset()
try:
    torch.compile(f(torch.compiler.nested_compile_region(attn)), backend="aot_eager", fullgraph=True)(x, bias).sum().backward()
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    sys.exit(1)
print(f"not reproduced ({torch.__version__})")
sys.exit(0)
