"""Backends that mishandle one spelling of one op (generators.spellings):
each walks the FX graph Dynamo hands it, adds 0.5 to the result of the
nodes of its one form only (``torch.relu`` but not ``F.relu``, the method
``relu``, an nn.ReLU module, an aten overload, ``**``, in place, ``out=``),
then compiles the graph with aot_eager. A pattern-matching bug of a real
backend lives in one such form; a program that spells the op otherwise never
reaches it. Named as ``suites.planted_spellings:NAME`` (``FAULTS``)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

Node = torch.fx.Node


@dataclass(frozen=True)
class Fault:
    op: str  # the catalogue op whose spelling it breaks
    kind: str  # the spelling (generators.spellings.KINDS)
    hits: Callable[[Node], bool]  # the nodes it breaks
    doc: str


def _module(cls: type) -> Callable[[Node], bool]:
    """A node traced from inside an instance of ``cls`` (Dynamo inlines the
    module into its functional call, and says so in ``nn_module_stack``)."""
    return lambda n: n.op == "call_function" and any(
        c is cls for _, c in (n.meta.get("nn_module_stack") or {}).values())


FAULTS: dict[str, Fault] = {f"{f.kind}_{f.op}": f for f in (
    Fault("relu", "torch", lambda n: n.op == "call_function" and n.target is torch.relu, "torch.relu(x), not F.relu"),
    Fault("sigmoid", "functional", lambda n: n.op == "call_function" and n.target is F.sigmoid,
          "F.sigmoid(x), not torch.sigmoid"),
    Fault("relu", "method", lambda n: n.op == "call_method" and n.target == "relu", "x.relu()"),
    Fault("pow_scalar", "operator", lambda n: n.op == "call_function" and n.target is operator.pow,
          "x ** s, not x.pow(s)"),
    Fault("relu", "module", _module(torch.nn.ReLU), "an nn.ReLU instance, not F.relu (the same call_function)"),
    Fault("relu", "aten", lambda n: n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload),
          "any aten overload called from Python (torch.ops.aten.relu.default)"),
    Fault("relu", "inplace", lambda n: n.op == "call_method" and n.target == "relu_", "x.clone().relu_()"),
    Fault("sin", "out", lambda n: n.op == "call_function" and n.kwargs.get("out") is not None,
          "a call into out= (torch.sin(x, out=...))"),
)}


def _breaking(fault: Fault):
    def backend(gm: torch.fx.GraphModule, example_inputs):
        for node in [n for n in gm.graph.nodes if fault.hits(n)]:
            with gm.graph.inserting_after(node):
                bad = gm.graph.call_function(torch.add, (node, 0.5))
            node.replace_all_uses_with(bad, delete_user_cb=lambda n: n is not bad)
        gm.recompile()
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(gm, example_inputs)

    backend.__doc__ = f"aot_eager, but 0.5 off where the program writes {fault.doc}"
    return backend


def __getattr__(name: str):
    if name in FAULTS:
        return _breaking(FAULTS[name])
    raise AttributeError(name)
