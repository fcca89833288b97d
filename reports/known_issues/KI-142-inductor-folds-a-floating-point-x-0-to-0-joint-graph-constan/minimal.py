"""KI-142: inductor folds a floating-point x * 0 to zeros (UniformValueConstantFolder's peephole in
torch/_inductor/fx_passes/joint_graph.py): NaN * 0 and inf * 0 give 0 where eager gives NaN, and a negative x
gives +0.0 where eager gives -0.0 (exits 1 while the bug lives; 0 once inductor keeps eager's values)"""
import sys

import torch


def f(x):
    return x * 0


x = torch.tensor([float("nan"), float("inf"), -1.0, 2.0])
expected = f(x)
got = torch.compile(f, backend="inductor")(x)
same = torch.equal(torch.isnan(expected), torch.isnan(got)) and torch.equal(torch.signbit(expected), torch.signbit(got))
print(f"eager {expected.tolist()} signbit {torch.signbit(expected).tolist()}")
print(f"inductor {got.tolist()} signbit {torch.signbit(got).tolist()}")
if not same:
    print("REPRODUCED: inductor's x * 0 drops NaN and the sign of zero")
    sys.exit(1)
print("not reproduced: inductor's x * 0 matches eager")
