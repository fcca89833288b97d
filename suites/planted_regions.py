"""A backend with a planted fault in ``nested_compile_region`` reuse: named as
``suites.planted_regions:reuse_first_region_body``.

``torch.compiler.nested_compile_region`` promises that a region traced once is
reused only where reuse is sound: a call whose Python state differs (another
constant argument, another closure value) gets a body of its own. The backend
below breaks exactly that promise: every ``invoke_subgraph`` call whose
operands look like an earlier call's (same count, shapes, dtypes and
requires_grad) is rewritten to run the *earlier* call's subgraph, as a reuse
cache keyed on the tensor signature alone would. Then the graph runs through
``aot_eager``. A program whose decorated block is called under one Python
state only is compiled correctly; one that calls it under two shows wrong
values from the later calls on.
"""

from __future__ import annotations

import torch

INVOKE_SUBGRAPH = torch.ops.higher_order.invoke_subgraph


def _signature(node: torch.fx.Node) -> tuple:
    """What a reuse cache keyed on tensors alone would see of a call's operands."""
    out = []
    for a in node.args[2:]:
        v = a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a
        if isinstance(v, torch.Tensor):
            out.append((tuple(v.shape), v.dtype, v.requires_grad))
        else:
            out.append(type(v).__name__)
    return tuple(out)


def reuse_first_body(gm: torch.fx.GraphModule) -> int:
    """Rewrites later ``invoke_subgraph`` calls of ``gm`` to run the first
    subgraph called with the same operand signature; returns how many."""
    first: dict[tuple, torch.fx.Node] = {}
    changed = 0
    for node in gm.graph.nodes:
        if node.target is not INVOKE_SUBGRAPH:
            continue
        key = _signature(node)
        earlier = first.setdefault(key, node)
        if earlier is not node and earlier.args[1] != node.args[1]:
            node.args = (earlier.args[0], earlier.args[1], *node.args[2:])
            changed += 1
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return changed


def reuse_first_region_body(gm: torch.fx.GraphModule, example_inputs):
    reuse_first_body(gm)
    from torch._dynamo.backends.debugging import aot_eager

    return aot_eager(gm, example_inputs)
