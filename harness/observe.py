"""Observers on the real pass: they record what it did and change nothing.

``recording_regions`` wraps ``GraphRegionTracker.get_identical_regions`` for the
duration of a capture and keeps the groups it returned; ``recording_backend``
keeps the post-deduplication graph Dynamo hands to the backend, then calls the
real backend with it.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
from torch._dynamo.graph_region_tracker import GraphRegionTracker

from .outcome import Capture, RegionNode


def _target_name(node: torch.fx.Node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    return getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)


@contextlib.contextmanager
def recording_regions(capture: Capture) -> Iterator[None]:
    original = GraphRegionTracker.get_identical_regions

    def get_identical_regions(self, graph):  # type: ignore[no-untyped-def]
        groups = original(self, graph)
        capture.region_groups.extend(
            [[RegionNode(n.name, n.op, _target_name(n)) for n in region] for region in group]
            for group in groups
        )
        return groups

    GraphRegionTracker.get_identical_regions = get_identical_regions  # type: ignore[method-assign]
    try:
        yield
    finally:
        GraphRegionTracker.get_identical_regions = original  # type: ignore[method-assign]


def recording_backend(compiler_fn: Callable, capture: Capture) -> Callable:
    def backend(gm: torch.fx.GraphModule, example_inputs):  # type: ignore[no-untyped-def]
        capture.frames += 1
        capture.graphs.append(gm.code)
        capture.invoke_subgraph_calls += sum(
            n.target is torch.ops.higher_order.invoke_subgraph for n in gm.graph.nodes
        )
        return compiler_fn(gm, example_inputs)

    return backend

