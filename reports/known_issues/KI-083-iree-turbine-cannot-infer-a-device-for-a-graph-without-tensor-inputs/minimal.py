"""KI-083: iree-turbine cannot compile a graph with no tensor input (the part after an .item() graph break) (raises while the bug lives)"""
import torch

def f(x):
    s = x.abs().amax().item()  # graph break: what follows is a graph of its own ...
    torch.set_default_dtype(torch.float32)  # ... holding this call and no tensor input
    return s

# raises BackendCompilerFailed ... RuntimeError: Could not infer a device for `iree_turbine` backend.
torch.compile(f, backend="turbine_cpu")(torch.randn(3))
print("not reproduced: the compiled call ran")
