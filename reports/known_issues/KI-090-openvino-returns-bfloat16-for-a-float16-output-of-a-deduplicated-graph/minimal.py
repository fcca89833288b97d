"""KI-090: OpenVINO returns float16 for a linear under autocast(bfloat16), where eager gives bfloat16 (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F
import openvino.torch  # noqa: F401  (registers backend="openvino")

# Off (the default): float16 comes back. On, the two block calls become
# invoke_subgraph calls and OpenVINO returns bfloat16, as eager does.
torch._dynamo.config.use_graph_deduplication = False
torch.manual_seed(0)
w, b = torch.randn(2, 2), torch.randn(2)


def block(x):
    return F.linear(x * 2, w, b)


def f(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return block(x), block(x)


x = torch.randn(5, 2)
out = torch.compile(f, backend="openvino")(x)
print("eager", f(x)[0].dtype, "openvino", out[0].dtype)
torch.testing.assert_close(out, f(x))
print("not reproduced: openvino matches eager")
