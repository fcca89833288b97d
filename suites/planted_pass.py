"""Planted faults in the deduplication pass itself: each context manager
patches the real pass in one known way for the duration of a run, so a
structural oracle can be shown to fire and to name the fault."""

from __future__ import annotations

import contextlib
import itertools
from typing import Iterator

import torch
from torch._dynamo import graph_deduplication, graph_region_tracker, output_graph


@contextlib.contextmanager
def _patched(owner, name: str, value) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """``owner.name`` replaced by ``value(original)`` for the duration, then put back exactly as it was:
    a staticmethod or classmethod as its descriptor, an attribute the class inherited deleted again.
    ``original`` is what the attribute reads as, but a classmethod's descriptor (a wrapper must bind it
    to the class it is called on, a subclass too)."""
    own = vars(owner)
    raw = own.get(name)
    had = name in own
    original = raw if isinstance(raw, classmethod) else getattr(owner, name)
    setattr(owner, name, value(original))
    try:
        yield
    finally:
        if had:
            setattr(owner, name, raw)
        else:
            delattr(owner, name)


@contextlib.contextmanager
def _stack(*managers) -> Iterator[None]:
    """Several patches entered as one planted fault (each is a context manager, applied on entry)."""
    with contextlib.ExitStack() as stack:
        for m in managers:
            stack.enter_context(m)
        yield


def ints_ignored():
    """The tracker's key forgets int constants, as it forgets floats (KI-001):
    ``x.sum(dim=0)`` and ``x.sum(dim=1)`` on one line look alike."""
    return _patched(graph_region_tracker, "_extract_args",
                    lambda orig: lambda arg: None if type(arg) is int else orig(arg))


def grad_mode_ignored():
    """The tracker's global-state key forgets grad mode."""
    return _patched(graph_region_tracker, "get_global_state_key",
                    lambda orig: lambda: orig()[1:])


def tensor_metadata_ignored():
    """The tracker's key forgets the shape (and all metadata) of tensor arguments."""
    return _patched(graph_region_tracker, "_extract_tensor_metadata_for_node_hash",
                    lambda orig: lambda x: orig(torch.empty(())))


def arguments_swapped():
    """Every region after a group's first is called with its first two
    external inputs swapped."""
    def wrap(orig):
        def replace(graph, region, get_subgraph_node, external_node_usages, *args):
            usages = list(external_node_usages)
            if graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph) and len(usages) > 1:
                usages[0], usages[1] = usages[1], usages[0]
            return orig(graph, region, get_subgraph_node, usages, *args)

        return replace

    return _patched(graph_deduplication, "_replace_region_with_subgraph", wrap)


def mutation_check_skipped():
    """Regions that write to their inputs are replaced anyway."""
    def wrap(orig):
        def replace(graph, region, get_subgraph_node, external_node_usages, node_usage_to_tuple_elems,
                    ind_to_tuple_spec, inds_with_external_users, subgraph_name, node_to_additional_deps,
                    node_to_mutated_arg_positions):
            return orig(graph, region, get_subgraph_node, external_node_usages, node_usage_to_tuple_elems,
                        ind_to_tuple_spec, inds_with_external_users, subgraph_name, node_to_additional_deps, {})

        return replace

    return _patched(graph_deduplication, "_replace_region_with_subgraph", wrap)


def _after_dedup(edit):  # type: ignore[no-untyped-def]
    def wrap(orig):
        def dedup(og):
            result = orig(og)
            edit(og.graph)
            return result

        return dedup

    return _patched(output_graph, "apply_graph_deduplication", wrap)


def _cyclic_edge(graph: torch.fx.Graph) -> None:
    calls = graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph)
    later = [u for u in calls[-1].users]
    if len(calls) > 1 and later:
        calls[0].args = (*calls[0].args, later[0])


def cyclic_edge():
    """After the pass, the first subgraph call also takes an input computed
    from the last one: a cycle."""
    return _after_dedup(_cyclic_edge)


def _grad_mode_moved(graph: torch.fx.Graph) -> None:
    setters = graph.find_nodes(op="call_function", target=torch._C._set_grad_enabled)
    if setters:
        output = next(iter(graph.find_nodes(op="output")))
        output.prepend(setters[0])


def grad_mode_moved():
    """After the pass, the first grad-mode switch is moved to the end of the
    graph: the nodes it guarded now run in the wrong mode."""
    return _after_dedup(_grad_mode_moved)


def regions_dropped():
    """The tracker reports no region groups: nothing is deduplicated."""
    return _patched(graph_region_tracker.GraphRegionTracker, "get_identical_regions",
                    lambda orig: lambda self, graph: (orig(self, graph), [])[1])


def regions_flaky():
    """Every other capture, the tracker loses its first region group."""
    counter = itertools.count()

    def wrap(orig):
        def regions(self, graph):
            groups = orig(self, graph)
            return groups[1:] if next(counter) % 2 else groups

        return regions

    return _patched(graph_region_tracker.GraphRegionTracker, "get_identical_regions", wrap)


def extra_guard():
    """The pass installs a guard of its own (on a global the program reads)."""
    def add(graph: torch.fx.Graph) -> None:
        from torch._dynamo.guards import GuardBuilder, install_guard
        from torch._dynamo.source import GlobalSource

        install_guard(GlobalSource("nn").make_guard(GuardBuilder.ID_MATCH))

    return _after_dedup(add)


def _mutation_reordered(graph: torch.fx.Graph) -> None:
    """Moves the second in-place write before the first write's reader."""
    writes = [n for n in graph.nodes if n.op == "call_method" and n.target == "mul_"]
    if len(writes) > 1:
        reader = next(iter(writes[0].users), None)
        if reader is not None:
            reader.prepend(writes[1])


def mutation_reordered():
    """After the pass, an in-place write runs before a read it used to follow
    (the ordering edge the pass keeps for mutations, dropped)."""
    return _after_dedup(_mutation_reordered)


def autocast_order_dropped():
    """The pass forgets that autocast's enter and exit order the nodes around them (its global-state
    dependencies): a region's call may be sorted out of the bracket its region was traced in."""
    return _patched(graph_deduplication, "_add_global_state_dependencies", lambda orig: lambda graph, deps: None)


# fault name -> its context, entered once per process: resolving the backend again (every compile of a
# campaign's worker does) must not stack the patch on itself (a swap applied twice is no swap)
_ENTERED: dict = {}


def fault_backend(name: str, faults: dict):
    """``<fault>__<backend>`` (e.g. ``pending_stores_ignored__aot_eager``): the
    backend, with the planted Dynamo fault entered for good. For a repro's own
    process, whose ``BACKEND = "suites.planted_pass:..."`` thereby runs under
    the fault; never for a process that goes on to test anything else."""
    fault, sep, backend = name.partition("__")
    found = faults.get(fault) if sep else None
    if found is None:
        raise AttributeError(name)
    key = f"{getattr(found, '__module__', '')}.{fault}"
    if key not in _ENTERED:
        context = found()
        context.__enter__()
        _ENTERED[key] = context  # a context manager left to the collector exits, and would undo the fault
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend(backend)


def render_planted(program, backend: str, check: str, *args, dedup: bool = True, **kwargs) -> str:
    """A repro of ``program`` whose BACKEND may be a planted Dynamo fault
    (``<module>:<fault>__<backend>``): rendered for the honest backend, then
    renamed, since resolving the fault here would leave it entered in this
    process (and every later test in it would compile under it)."""
    from harness.outcome import RunConfig
    from reports.repro import render_repro

    honest = backend.rpartition("__")[2] if "__" in backend else backend
    text = render_repro(program, RunConfig(backend=honest, dedup=dedup), "planted", check, *args, **kwargs)
    return text.replace(f"BACKEND = {honest!r}", f"BACKEND = {backend!r}") if honest != backend else text


def __getattr__(name: str):
    """``<fault>__<backend>``: a backend under a planted pass fault."""
    return fault_backend(name, {f.__name__: f for f in (
        ints_ignored, grad_mode_ignored, tensor_metadata_ignored, arguments_swapped, mutation_check_skipped,
        cyclic_edge, grad_mode_moved, regions_dropped, regions_flaky, extra_guard, mutation_reordered)})
