"""KI-078: torch.func.functionalize of a graph holding invoke_subgraph reads a missing ctx.mode (raises while the bug lives)"""
import torch
import torch.nn.functional as F
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch.fx.experimental.proxy_tensor import make_fx

def fw(gm, example_inputs):  # what iree-turbine's backend does to every graph
    make_fx(torch.func.functionalize(gm))(*example_inputs)
    return make_boxed_func(gm.forward)

def g(x, ws):
    for w in ws:
        x = F.gelu(F.linear(x, w))
    return x

torch._dynamo.config.use_graph_deduplication = True
torch.compile(g, backend=aot_autograd(fw_compiler=fw))(torch.randn(4, 16), [torch.randn(16, 16) for _ in range(3)])
print("not reproduced: functionalized")
