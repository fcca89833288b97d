"""KI-088: OpenVINO folds x * 0 to +0.0, losing the -0.0 eager gives for x < 0 (exits 1 while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers backend="openvino")

def f(x):
    return x * 0, x + 1  # alone (no second output) x * 0 keeps its sign

x = torch.tensor([-1.0, 2.0])
with torch.no_grad():
    expected = f(x)[0]  # [-0.0, 0.0]
    actual = torch.compile(f, backend="openvino")(x)[0]  # [0.0, 0.0]
# 1 / zero shows the zero's sign: -inf for -0.0, inf for +0.0
torch.testing.assert_close(1 / actual, 1 / expected)
print("not reproduced: the compiled zeros keep their sign")
