"""KI-162: OpenVINO returns a copy where eager returns a view of an input (y0.narrow, x.unsqueeze): a write
through the output no longer reaches the input. Exit 1 while it reproduces."""
import sys

import openvino.torch  # noqa: F401  (registers the backend)
import torch


def f(y0):
    return y0 + 1, y0.narrow(-1, 0, 1)


y0 = torch.randn(3, 4)
with torch.no_grad():
    _, view = torch.compile(f, backend="openvino")(y0)
view.fill_(7.0)  # eager: writes y0[:, 0]
shared = view.untyped_storage().data_ptr() == y0.untyped_storage().data_ptr()
print("view of the input kept:", shared, "| y0[:, 0] after writing through it:", y0[:, 0].tolist())
sys.exit(0 if shared and bool((y0[:, 0] == 7).all()) else 1)
