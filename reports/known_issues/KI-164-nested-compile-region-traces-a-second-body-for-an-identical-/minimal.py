"""nested_compile_region: two identical calls get two subgraphs under dynamic shapes when one call's
tensor is a graph input and the other's an intermediate, and an argument keeps the call off the
automatic reuse cache ("not eligible -- unsupported input VT types", here a dataclass instance).

Dynamo then falls back to install_subgraph_in_output_graph -> are_same_graph_modules
(torch/_dynamo/variables/higher_order_ops.py), which compares each placeholder's
extract_tensor_metadata(...)._flatten_into(...) structurally. storage_bytes of the graph input x
is 8*s0*s53*(s77 - 1) + 8*s0*(s53 - 1) + 8*s0 (size from strides, unexpanded), that of the
intermediate h is 8*s0*s53*s77: equal, but not the same sympy expression, so the bodies are "different".

Exit 1: two subgraphs for identical calls (reproduced); 0: one shared subgraph."""
import sys
from dataclasses import dataclass

import torch
import torch._dynamo


@dataclass
class Cfg:
    s0: int


CFG = Cfg(2)


@torch.compiler.nested_compile_region
def block(x, cfg):
    return x + cfg.s0


def f(x):
    h = block(x, CFG)     # x: a graph input
    return block(h, CFG)  # h: an intermediate, same shape/stride/dtype/device


def subgraphs(fn, x, dynamic):
    torch._dynamo.reset()
    seen = set()

    def backend(gm, example_inputs):
        for n in gm.graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph):
            seen.add(str(n.args[1]))
        return gm.forward

    torch._dynamo.config.inline_single_use_invoke_subgraph = False  # else single-use bodies are inlined before the backend
    torch.compile(fn, backend=backend, dynamic=dynamic)(x)
    return sorted(seen)


static = subgraphs(f, torch.randn(3, 4, 5), dynamic=False)
dynamic = subgraphs(f, torch.randn(3, 4, 5), dynamic=True)
print(f"torch {torch.__version__}")
print(f"static shapes : {static}")
print(f"dynamic shapes: {dynamic}")
if len(dynamic) > 1:
    print("REPRODUCED: identical nested_compile_region calls use", len(dynamic), "subgraphs under dynamic=True")
    sys.exit(1)
print("not reproduced")
sys.exit(0)
