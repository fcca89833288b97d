"""Observers at torch.compile's own hooks: they record and change nothing.

``recording_backend`` keeps the post-deduplication graph Dynamo hands to the
backend (see ``harness.structure`` for what is recorded inside the pass), then
calls the real backend with it; ``recording_guards`` writes down every guard.
"""

from __future__ import annotations

from typing import Callable

import torch

from .outcome import Capture
from .structure import StructureRecorder


def recording_guards(capture: Capture) -> Callable:
    """A ``guard_filter_fn`` that keeps every guard and writes each down."""

    def keep_all(entries):  # type: ignore[no-untyped-def]
        capture.guards.extend(f"{e.guard_type} {e.name}" for e in entries)
        return [True] * len(entries)

    return keep_all


def recording_backend(compiler_fn: Callable, capture: Capture, recorder: StructureRecorder) -> Callable:
    def backend(gm: torch.fx.GraphModule, example_inputs):  # type: ignore[no-untyped-def]
        recorder.on_backend(gm, example_inputs)
        capture.frames += 1
        capture.graphs.append(gm.code)
        capture.invoke_subgraph_calls += sum(
            n.target is torch.ops.higher_order.invoke_subgraph for n in gm.graph.nodes
        )
        return compiler_fn(gm, example_inputs)

    backend.__name__ = getattr(compiler_fn, "__name__", "backend")  # named in Dynamo's errors
    return backend

