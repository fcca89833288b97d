"""KI-164: two identical nested_compile_region calls get two subgraphs under dynamic shapes when the reuse cache refuses them (a dataclass argument) and one call's tensor is a graph input, the other's an intermediate. Exit 1 while it reproduces."""
import sys
from dataclasses import dataclass

import torch


@dataclass
class Cfg:
    s0: int


CFG = Cfg(2)


@torch.compiler.nested_compile_region
def block(x, cfg):
    return x + cfg.s0


def f(x):
    return block(block(x, CFG), CFG)  # x: a graph input; block(x, CFG): an intermediate of the same metadata


bodies = set()


def backend(gm, example_inputs):
    bodies.update(str(n.args[1]) for n in gm.graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph))
    return gm.forward


torch._dynamo.config.inline_single_use_invoke_subgraph = False  # else a body used once never reaches a backend
torch.compile(f, backend=backend, dynamic=True)(torch.randn(3, 4, 5))
print(f"subgraphs for two identical calls: {sorted(bodies)} (dynamic=False: one)")
sys.exit(1 if len(bodies) > 1 else 0)
