"""KI-078 with torch alone (no IREE): torch.func.functionalize of the graph
Dynamo hands a backend, once it holds invoke_subgraph. Exit 1: reproduced;
0: functionalized. What iree-turbine's turbine_cpu backend does to every graph."""
import sys

import torch
import torch.nn.functional as F
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch.fx.experimental.proxy_tensor import make_fx
from torch.func import functionalize


def fw(gm, example_inputs):
    make_fx(functionalize(gm))(*example_inputs)
    return make_boxed_func(gm.forward)


def g(x, ws):
    for i in range(3):
        x = F.gelu(F.linear(x, ws[i]))
    return x


x, ws = torch.randn(4, 16), [torch.randn(16, 16) for _ in range(3)]
try:
    with torch._dynamo.config.patch(use_graph_deduplication=True):
        torch.compile(g, backend=aot_autograd(fw_compiler=fw))(x, ws)
except Exception as e:  # noqa: BLE001
    if "FunctorchFunctionalizeAPI" in str(e) and "mode" in str(e):
        line = next(ln for ln in str(e).splitlines() if "FunctorchFunctionalizeAPI" in ln)
        print(f"REPRODUCED: {line} (torch {torch.__version__})")
        sys.exit(1)
    raise
print(f"not reproduced (torch {torch.__version__})")
