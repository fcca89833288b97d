"""A backend with a planted fault in nested subgraphs: named as
``suites.planted_nested:corrupt_second_inner_call``.

When a block marked ``nested_compile_region`` calls another marked block,
Dynamo traces the outer block into a subgraph whose own graph holds
``invoke_subgraph`` calls of the inner one. The backend below corrupts the
result of the second inner call inside every such outer subgraph, and
leaves everything else alone: a bug only a hierarchy of regions (an outer
region calling an inner region at least twice) can show.
"""

from __future__ import annotations

import operator

import torch

INVOKE_SUBGRAPH = torch.ops.higher_order.invoke_subgraph


def _calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.target is INVOKE_SUBGRAPH]


def _subgraph(gm: torch.fx.GraphModule, call: torch.fx.Node):
    """The GraphModule an ``invoke_subgraph`` node runs (its first argument, a
    ``get_attr`` of ``gm``), or None."""
    target = call.args[0]
    if isinstance(target, torch.fx.Node) and target.op == "get_attr":
        module = getattr(gm, target.target, None)
        return module if isinstance(module, torch.fx.GraphModule) else None
    return None


def _corrupt_first_output(gm: torch.fx.GraphModule, call: torch.fx.Node) -> bool:
    """Adds 1.0 to the first output (``getitem 0``) of ``call``."""
    done = False
    for user in list(call.users):
        if user.target is operator.getitem and user.args[1] == 0:
            with gm.graph.inserting_after(user):
                bad = gm.graph.call_function(torch.add, (user, 1.0))
            user.replace_all_uses_with(bad, delete_user_cb=lambda n, bad=bad: n is not bad)
            done = True
    return done


def corrupt_second_inner_call(gm: torch.fx.GraphModule, example_inputs):
    """In every subgraph that an ``invoke_subgraph`` call runs (at any depth)
    and that itself calls ``invoke_subgraph`` at least twice, the second inner
    call's first result is off by 1.0; then runs like the ``eager`` backend."""
    corrupted: set[int] = set()  # one subgraph module may serve several outer calls

    def visit(module: torch.fx.GraphModule) -> None:
        for call in _calls(module):
            outer = _subgraph(module, call)
            if outer is None or id(outer) in corrupted:
                continue
            corrupted.add(id(outer))
            inner = _calls(outer)
            if len(inner) >= 2 and _corrupt_first_output(outer, inner[1]):
                outer.recompile()
            visit(outer)

    visit(gm)
    return gm.forward
