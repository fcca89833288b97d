"""KI-075: OpenVINO runs aten._assert_scalar with a Tensor where it takes a number (an unbacked nonzero size): RuntimeError (raises while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers backend="openvino")

torch._dynamo.config.capture_dynamic_output_shape_ops = True


def f(x):
    return x * (x > 0).nonzero().shape[0]


x = torch.randn(8)
torch.testing.assert_close(torch.compile(f, backend="openvino")(x), f(x))
print("not reproduced: openvino matches eager")
