"""KI-076: OpenVINO hands out one output buffer for every call of a compiled graph: an earlier result is overwritten (exits 1 while the bug lives)"""
import torch
import openvino.torch  # noqa: F401  (registers backend="openvino")

def block(t):  # with tanh(tanh(t)) written in the loop instead, the outputs stay apart
    return torch.tanh(torch.tanh(t))

def f(x, y):
    outs = []
    for t in (x, y):
        outs.append(block(t))
        print(end="")  # graph break: the second iteration runs in a resumed frame
    return outs

x, y = torch.ones(3), torch.full((3,), -1.0)
with torch.no_grad():
    expected = f(x, y)  # [0.642, ...], [-0.642, ...]
    actual = torch.compile(f, backend="openvino")(x, y)  # one buffer: [-0.642, ...] twice
torch.testing.assert_close(actual, expected)
print("not reproduced: each call's output keeps its own values")
