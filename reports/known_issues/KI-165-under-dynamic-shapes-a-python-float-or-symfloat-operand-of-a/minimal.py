# region_activation_memory_budget + dynamic shapes: a SymFloat scalar in a tensor op
# (x.numel() * 0.5) is rewritten by AOTAutograd's tensorify_python_scalars pass into
# new scalar_tensor / mul.Tensor / convert_element_type / add.Tensor nodes that do not
# carry node.meta["custom"], so the partitioner's full-coverage check rejects the graph.
# Exits 1 while the bug reproduces, 0 otherwise. Graph deduplication is off (default).
import sys
import torch


def f(x):
    with torch.autograd.graph.region_activation_memory_budget(0.4):
        return x.sin() + x.numel() * 0.5


x = torch.randn(8, requires_grad=True)
try:
    out = torch.compile(f, backend="aot_eager", dynamic=True)(x)
except Exception as e:  # BackendCompilerFailed: ... must cover the entire forward ...
    print(f"{type(e).__name__}: {e}")
    sys.exit(1)
torch.testing.assert_close(out, x.sin() + x.numel() * 0.5)
print("not reproduced: compiled and matches eager")
sys.exit(0)
