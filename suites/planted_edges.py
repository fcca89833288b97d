"""Planted faults that only the edge-of-equality parts of the generator can
catch: state changed inside one compiled call, in-place writes between
repeats, aliasing between inputs, and fields of user objects. Each is a
real change to Dynamo (a context manager patching it for one run) or a real
backend (``suites.planted_edges:NAME``)."""

from __future__ import annotations

import torch
from torch._dynamo import side_effects
from torch._dynamo.guards import GuardBuilder

from .planted_pass import _patched, fault_backend


def pending_stores_ignored():
    """Dynamo forgets what the frame itself stored: an object attribute
    assigned earlier in the compiled call reads as it was when the call began
    (only programs that rebind a value between repeats see it)."""
    return _patched(side_effects.SideEffects, "has_pending_mutation_of_attr",
                    lambda orig: lambda self, item, name, *kinds: False)  # torch 2.13 adds mutation_kinds


def stores_dropped():
    """Dynamo leaves out the writes the frame made to Python state outside it (a global, an object's or a
    dict's field): codegen replays no attribute mutation after the graph. Every value read inside the frame
    stays right; only the state the call leaves behind is stale."""
    def update(orig):
        def codegen_update_mutated(self, *args, **kwargs):
            kept, self.store_attr_mutations = self.store_attr_mutations, {}
            try:
                return orig(self, *args, **kwargs)
            finally:
                self.store_attr_mutations = kept
        return codegen_update_mutated

    return _patched(side_effects.SideEffects, "codegen_update_mutated", update)


def last_region_as_reference():
    """The pass builds each group's subgraph from its last region instead of
    its first. Regions of one group are alike up to which inputs they share,
    so only a group where one region received one tensor twice (an aliased
    call) and another did not computes anything different."""
    from torch._dynamo import graph_region_tracker

    def wrap(orig):  # type: ignore[no-untyped-def]
        def regions(self, graph):  # type: ignore[no-untyped-def]
            return [list(reversed(group)) for group in orig(self, graph)]

        return regions

    return _patched(graph_region_tracker.GraphRegionTracker, "get_identical_regions", wrap)


# The objects the generator's programs keep their fields in (generators.codegen:
# OBJECTS and the packed arguments' tuple).
_USER_OBJECTS = ("G['CONFIG']", "G['STATE']", "G['ARGS']")


def object_fields_unguarded():
    """Fields of user objects (a dataclass instance, a SimpleNamespace, the
    packed arguments' dataclasses) are not guarded: changing one in place,
    with the object itself the same, reuses the stale graph."""
    def make(original):  # type: ignore[no-untyped-def]
        def EQUALS_MATCH(self, guard, *args, **kwargs):  # type: ignore[no-untyped-def]
            if guard.name.startswith(_USER_OBJECTS):
                return None
            return original(self, guard, *args, **kwargs)

        return EQUALS_MATCH

    return _patched(GuardBuilder, "EQUALS_MATCH", make)


def _is_write(node: torch.fx.Node) -> bool:
    """The writes generators.codegen.WRITE_LINES makes between repeats:
    ``y.mul_(-0.5)`` and ``y[..., :1].add_(1.0)`` on a graph input."""
    if node.op != "call_method" or node.target not in ("mul_", "add_") or len(node.args) != 2:
        return False
    target, value = node.args
    base = target.args[0] if isinstance(target, torch.fx.Node) and target.op == "call_function" else target
    return isinstance(base, torch.fx.Node) and base.op == "placeholder" and value in (-0.5, 1.0)


def writes_deferred(gm: torch.fx.GraphModule, example_inputs):
    """Runs the graph like ``eager`` after moving every write to a graph input
    made between repeats to the end: the repeats after a write read the old
    values (an ordering edge from a mutation to later readers, lost)."""
    output = next(iter(gm.graph.find_nodes(op="output")))
    for node in [n for n in gm.graph.nodes if _is_write(n)]:
        for dep in node.all_input_nodes:  # a slice the write goes through moves with it
            if dep.op == "call_function" and len(dep.users) == 1:
                output.prepend(dep)
        output.prepend(node)
    gm.graph.lint()
    gm.recompile()
    return gm


def _faults() -> dict:
    from . import planted_guards

    return {f.__name__: f for f in (pending_stores_ignored, stores_dropped, last_region_as_reference, object_fields_unguarded,
                                    planted_guards.float_guard_signless, planted_guards.module_identity_dropped)}


def __getattr__(name: str):
    return fault_backend(name, _faults())
