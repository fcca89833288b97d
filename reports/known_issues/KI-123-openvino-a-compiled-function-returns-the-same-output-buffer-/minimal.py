"""KI-123: OpenVINO returns the same output buffer from every call: the next call overwrites an earlier result (exits 1 while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers backend="openvino")

torch._dynamo.config.use_graph_deduplication = True  # as found; the bug shows without it too
g = torch.compile(lambda x: x * 2 + 1, backend="openvino")
with torch.inference_mode():
    a = g(torch.ones(3))  # [3., 3., 3.]
    b = g(torch.full((3,), 5.0))  # [11., 11., 11.], written into a's memory
torch.testing.assert_close(a, torch.full((3,), 3.0))  # a now reads [11., 11., 11.]
print("not reproduced: an earlier result keeps its values")
