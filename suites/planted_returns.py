"""Planted faults that only blocks returning more than their result
(``generators.returns``) can reach: a backend that copies outputs aliasing
inputs or one another (``suites.planted_returns:aliases_copied``), and a
pass fault in the rewiring of a region with several read outputs
(``suites.planted_returns:region_outputs_swapped__<backend>`` enters it in a
repro's own process), and one in the outputs a group's subgraph gives its
members (``first_region_outputs_only``), and one in nested_compile_region's
reuse check of what a body returns (``python_outputs_reused``)."""

from __future__ import annotations

from torch._dynamo import graph_deduplication
from torch._dynamo.variables import invoke_subgraph as invoke_subgraph_variables

from .planted_pass import _patched, fault_backend


def aliases_copied(gm, example_inputs):
    """A backend that runs the graph like ``eager`` but hands back a copy of
    every output that shares storage with a graph input or an earlier output:
    the values are right, a write through the output no longer reaches what
    it aliases (reached by a block returning its input, a view of it, a
    tensor twice, or an output and a view of it)."""
    import torch

    def storage(t):  # type: ignore[no-untyped-def]
        return t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() else None

    def run(*args):  # type: ignore[no-untyped-def]
        outs = gm(*args)
        seen = {storage(a) for a in args} - {None}
        copied = []
        for o in outs:
            key = storage(o)
            copied.append(o.clone() if key is not None and key in seen else o)
            seen.add(key)
        return type(outs)(copied) if isinstance(outs, (tuple, list)) else outs

    return run


def region_outputs_swapped():
    """Every region after a group's first hands its callers its first two
    read outputs the other way round: reached by a block whose callers read
    two of what it returns."""
    def wrap(orig):  # type: ignore[no-untyped-def]
        seen: set[str] = set()

        def replace(graph, region, get_subgraph_node, external_node_usages, node_usage_to_tuple_elems,
                    ind_to_tuple_spec, inds_with_external_users, subgraph_name, *args):  # type: ignore[no-untyped-def]
            outputs = list(inds_with_external_users)
            if subgraph_name in seen and len(outputs) > 1:
                outputs[0], outputs[1] = outputs[1], outputs[0]
            seen.add(subgraph_name)
            return orig(graph, region, get_subgraph_node, external_node_usages, node_usage_to_tuple_elems,
                        ind_to_tuple_spec, outputs, subgraph_name, *args)

        return replace

    return _patched(graph_deduplication, "_replace_region_with_subgraph", wrap)


def first_region_outputs_only():
    """A group's subgraph returns what the callers of its *first* region read, not every member's
    (``_get_all_output_indices`` scanning one region): a later call whose callers read more of the region
    keeps a node the pass then erases. Reached by a block whose second item only some callers read."""
    return _patched(graph_deduplication, "_get_all_output_indices", lambda orig: lambda regions: orig(regions[:1]))


def python_outputs_reused():
    """nested_compile_region's reuse check (``is_reuse_eligible``: a body's output must be tensors) judges a
    tuple on its tensors alone, so a body returning a Python value beside its result (a size, None) is reused:
    the cached call rebuilds its outputs from the tensors the graph returns, and loses the Python item. Reached
    by a region body returning a Python value beside its result."""
    def wrap(orig):  # type: ignore[no-untyped-def]
        def eligible(tx, body_r, *args, **kwargs):  # type: ignore[no-untyped-def]
            from torch._dynamo.variables.lists import TupleVariable
            from torch._dynamo.variables.tensor import TensorVariable

            if isinstance(body_r, TupleVariable):
                body_r = TupleVariable([i for i in body_r.items if isinstance(i, TensorVariable)])
            return orig(tx, body_r, *args, **kwargs)

        return eligible

    return _patched(invoke_subgraph_variables, "is_reuse_eligible", wrap)


def __getattr__(name: str):
    """``<fault>__<backend>``: a backend under a planted pass fault."""
    return fault_backend(name, {f.__name__: f for f in (region_outputs_swapped, first_region_outputs_only,
                                                        python_outputs_reused)})
