"""KI-087: OpenVINO gives float64 for an int64 tensor times a Python float, where torch gives float32 (exits 1 while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers backend="openvino")

def f(x, s):
    return x.long() * s  # int64 tensor * float: the default dtype (float32)

x = torch.tensor([1.0, 2.0])
with torch.no_grad():
    expected = f(x, 2.5)
    # dynamic=True: the float reaches the backend as a graph input (with dynamic=False it is a constant, and right)
    actual = torch.compile(f, backend="openvino", dynamic=True)(x, 2.5)
torch.testing.assert_close(actual, expected)  # dtype float64 != float32
print("not reproduced: the compiled dtype matches eager")
