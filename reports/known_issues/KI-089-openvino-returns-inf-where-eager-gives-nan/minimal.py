"""KI-089: OpenVINO runs a float64 graph in float32, saturating inf to 3.4e38: NaN is lost (exits 1 while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers backend="openvino")

def f(x):
    return x * 2 - x  # inf * 2 - inf: NaN (a one-op graph is run right)

x = torch.tensor([float("inf"), 1.0], dtype=torch.float64)  # with float32 the compiled result is right
with torch.inference_mode():
    expected = f(x)  # [nan, 1.0]
    actual = torch.compile(f, backend="openvino")(x)  # [3.4028e+38, 1.0]: float32's largest
torch.testing.assert_close(actual, expected, equal_nan=True)
print("not reproduced: the compiled result keeps the NaN")
