"""KI-130: under inference_mode, Dynamo takes a tensor made inside torch.enable_grad() for one that requires grad (exits 1 while the bug lives)"""
import sys

import torch


def f(x):
    with torch.enable_grad():
        h = x + x.sin()
    return h * (0.5 if h.requires_grad else 2.0)  # eager: inference tensors never require grad -> 2.0


x = torch.randn(2, 5, requires_grad=True)
compiled = torch.compile(f, backend="eager")
compiled(x)  # right outside inference mode
with torch.inference_mode():
    expected, got = f(x), compiled(x)  # the call recompiles for inference mode
if not torch.allclose(expected, got):
    print(f"REPRODUCED: max |compiled - eager| = {(expected - got).abs().max().item():.3g} (torch {torch.__version__})")
    sys.exit(1)
print("not reproduced")
