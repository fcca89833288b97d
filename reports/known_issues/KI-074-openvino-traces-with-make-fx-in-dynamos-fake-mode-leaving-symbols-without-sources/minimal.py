"""KI-074: OpenVINO re-traces F.conv2d in Dynamo's fake mode; Dynamo's guards then fail: IndexError (raises while the bug lives)"""
import torch
import torch.nn.functional as F
import openvino.torch  # noqa: F401  (registers backend="openvino")

x, w = torch.randn(2, 2, 1), torch.randn(2, 2, 3, 3)  # x (2, 2, 5, 5): AssertionError sources must not be empty
with torch.inference_mode():
    # raises while Dynamo builds the guards, after the backend compiled
    torch.compile(lambda x, w: F.conv2d(x, w, padding=1), backend="openvino")(x, w)
print("not reproduced: the compiled conv2d ran")
