"""KI-129: OpenVINO computes (x / 2 + 1) * inf as NaN where eager gives inf (exits 1 while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers the "openvino" backend)


def f(x):
    return (x / 2 + 1) * float("inf")


x = torch.tensor([-1.0, 0.0, 1.0])
with torch.no_grad():
    expected, actual = f(x), torch.compile(f, backend="openvino")(x)
print("eager:", expected, "openvino:", actual)
torch.testing.assert_close(actual, expected)  # eager: inf everywhere; openvino: nan, nan, inf
print("not reproduced: openvino matches eager")
