"""An example backend plugin: AOTAutograd with a graph pass of your own.

A backend is any callable Dynamo accepts: ``(GraphModule, example_inputs) ->
callable``. Fuzz it with ``python -m harness fuzz --backend
harness.example_backend:backend``, or by the name ``example`` that
pyproject.toml registers in the ``dedup_harness.backends`` entry-point group
(your package would do the same in its own pyproject.toml).
"""

from __future__ import annotations

import torch
from torch._dynamo.backends.common import aot_autograd


def _fold_double_negation(gm: torch.fx.GraphModule, example_inputs):
    """The pass under test: ``neg(neg(x)) -> x`` on the ATen graphs AOTAutograd
    hands over (forward and backward). A wrong pass shows up as a finding."""
    for node in list(gm.graph.nodes):
        if node.target is torch.ops.aten.neg.default and getattr(node.args[0], "target", None) is torch.ops.aten.neg.default:
            node.replace_all_uses_with(node.args[0].args[0])
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


backend = aot_autograd(fw_compiler=_fold_double_negation, bw_compiler=_fold_double_negation)
backend.__doc__ = "AOTAutograd with an example ATen graph pass (harness/example_backend.py)"
