"""KI-172: inductor cannot compile a deduplicated region whose input size is a symbolic expression (s0 - 1): 'expected [s0] to have been codegen-ed' (exit 1 while it reproduces)"""
import sys
import torch
torch._dynamo.config.use_graph_deduplication = True  # off: compiles and runs


def block(v):
    return v.sin().cos()


def f(x):
    v = x[1:]  # size s0 - 1 under dynamic shapes
    return block(v) + block(v * 2)  # two identical regions: invoke_subgraph calls taking v only


try:
    torch.compile(f, backend="inductor", dynamic=True)(torch.randn(8))
except Exception as e:
    print(f"{type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr); sys.exit(1)
print("not reproduced: compiled and ran"); sys.exit(0)
