"""Backends that compute one OpInfo op wrongly in one place only: one
spelling of it (one fault per spelling kind), one dtype of it, or inside a
deduplicated region only. Each walks every graph Dynamo hands it (the
top-level one and the region bodies, ``invoke_subgraph``'s subgraphs), adds
0.5 to the result of the nodes it breaks, then compiles with aot_eager. A
campaign that draws the op in the wrong spelling, dtype or place never
sees it: the sweep (campaigns.op_sweep) must. Named as
``suites.planted_ops:NAME`` (``FAULTS``)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

Node = torch.fx.Node


@dataclass(frozen=True)
class Fault:
    op: str  # the OpInfo op it breaks
    where: str  # the spelling kind (generators.opinfo.KINDS), "dtype:<dtype>" or "region"
    hits: Callable[[Node, bool], bool]  # (node, inside a region body) -> broken
    doc: str


def _aten(name: str) -> Callable[[Node, bool], bool]:
    def hits(n: Node, region: bool) -> bool:
        t = n.target
        return n.op == "call_function" and isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)) \
            and t.__name__.split(".")[0] == name
    return hits


def _dtype(n: Node) -> torch.dtype | None:
    v = n.meta.get("example_value")
    return v.dtype if isinstance(v, torch.Tensor) else None


def _any_spelling(fn, method: str) -> Callable[[Node], bool]:
    return lambda n: (n.op == "call_function" and n.target is fn) \
        or (n.op == "call_method" and n.target in (method, method + "_")) or _aten(method)(n, False)


FAULTS: dict[str, Fault] = {f"{f.where}_{f.op}".replace(":", "_").replace(".", "_"): f for f in (
    Fault("hypot", "torch", lambda n, r: n.op == "call_function" and n.target is torch.hypot and "out" not in n.kwargs,
          "torch.hypot(x, y), not x.hypot(y)"),
    Fault("nn.functional.hardtanh", "functional", lambda n, r: n.op == "call_function" and n.target is F.hardtanh,
          "F.hardtanh(x), not the aten op"),
    Fault("lerp", "method", lambda n, r: n.op == "call_method" and n.target == "lerp", "x.lerp(y, w)"),
    Fault("remainder", "operator", lambda n, r: n.op == "call_function" and n.target is operator.mod, "x % y"),
    Fault("logaddexp2", "aten", _aten("logaddexp2"), "torch.ops.aten.logaddexp2(x, y)"),
    Fault("exp2", "inplace", lambda n, r: n.op == "call_method" and n.target == "exp2_", "x.clone().exp2_()"),
    Fault("log10", "out", lambda n, r: n.op == "call_function" and n.target is torch.log10 and "out" in n.kwargs,
          "torch.log10(x, out=...)"),
    Fault("cumprod", "dtype:float64", lambda n, r: _any_spelling(torch.cumprod, "cumprod")(n)
          and _dtype(n) == torch.float64, "cumprod of float64 in any spelling"),
    Fault("sinh", "region", lambda n, r: r and _any_spelling(torch.sinh, "sinh")(n),
          "sinh inside a region body (a deduplicated region or a nested_compile_region), any spelling"),
)}


def _graphs(gm: torch.fx.GraphModule):
    """(graph module, is a region body): the top-level graph and every subgraph it holds."""
    for name, m in gm.named_modules():
        if isinstance(m, torch.fx.GraphModule):
            yield m, bool(name)


def _breaking(fault: Fault):
    def backend(gm: torch.fx.GraphModule, example_inputs):
        for m, region in _graphs(gm):
            for node in [n for n in m.graph.nodes if fault.hits(n, region)]:
                with m.graph.inserting_after(node):
                    bad = m.graph.call_function(torch.add, (node, 0.5))
                node.replace_all_uses_with(bad, delete_user_cb=lambda n: n is not bad)
            m.recompile()
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(gm, example_inputs)

    backend.__doc__ = f"aot_eager, but 0.5 off where the program computes {fault.doc}"
    return backend


def __getattr__(name: str):
    if name in FAULTS:
        return _breaking(FAULTS[name])
    raise AttributeError(name)
