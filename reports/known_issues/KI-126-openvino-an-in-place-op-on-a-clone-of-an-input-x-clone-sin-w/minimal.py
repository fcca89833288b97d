"""KI-126: OpenVINO drops the clone in x.clone().sin_(): the in-place sin_ writes into the caller's input (exits 1 while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers backend="openvino")

torch._dynamo.config.use_graph_deduplication = True  # as found; the bug shows without it too

def f(x):
    return x * 2, x.clone().sin_()

x = torch.linspace(1, 3, 6).reshape(2, 3)
with torch.inference_mode():
    torch.compile(f, backend="openvino")(x)
torch.testing.assert_close(x, torch.linspace(1, 3, 6).reshape(2, 3))  # x now holds sin(x)
print("not reproduced: the input is left alone")
