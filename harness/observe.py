"""Observers at torch.compile's own hooks: they record and change nothing.

``recording_backend`` keeps the post-deduplication graph Dynamo hands to the
backend (see ``harness.structure`` for what is recorded inside the pass), then
calls the real backend with it; ``recording_guards`` writes down every guard;
``recording_reuse`` keeps what Dynamo says about reusing ``nested_compile_region`` bodies.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from typing import Callable, Iterator, Optional

import torch
import torch._dynamo.convert_frame as convert_frame

from .clock import in_harness
from .outcome import Capture
from .structure import StructureRecorder


def recording_guards(capture: Capture) -> Callable:
    """A ``guard_filter_fn`` that keeps every guard and writes each down."""

    def keep_all(entries):  # type: ignore[no-untyped-def]
        kept = capture.guards if capture.recording else capture.late_guards
        kept.extend(f"{e.guard_type} {e.name}" for e in entries)
        return [True] * len(entries)

    return keep_all


SYMBOLIC_OPERAND = "|sym"


def bodies(gm: torch.fx.GraphModule) -> list[str]:
    """Each invoke_subgraph call's body by identifier (a deduplicated region's too, where the pass ran), marked
    ``SYMBOLIC_OPERAND`` where the call hands it a symbolic number (a SymInt argument, say)."""
    out = []
    for n in gm.graph.nodes:
        if n.target is torch.ops.higher_order.invoke_subgraph:
            sym = any(isinstance(a.meta.get("example_value"), (torch.SymInt, torch.SymFloat, torch.SymBool))
                      for a in n.args[2:] if isinstance(a, torch.fx.Node))
            out.append(str(n.args[1]) + (SYMBOLIC_OPERAND if sym else ""))
    return out


def symbolic(gm: torch.fx.GraphModule) -> bool:
    """Whether a graph takes a symbolic value: a SymInt or SymFloat, or a
    tensor with a symbolic size (dynamic shapes, a float made dynamic)."""
    for node in gm.graph.find_nodes(op="placeholder"):
        value = node.meta.get("example_value")
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(value, torch.Tensor) and not all(isinstance(d, int) for d in value.shape):
            return True
    return False


def recording_backend(compiler_fn: Callable, capture: Capture, recorder: Optional[StructureRecorder]) -> Callable:
    """``recorder``: None when the run records no structure (RunConfig.record_structure)."""

    def backend(gm: torch.fx.GraphModule, example_inputs):  # type: ignore[no-untyped-def]
        called = bodies(gm)
        calls = len(called)
        if not capture.recording:
            capture.late_compiles += 1
            capture.late_invoke_subgraph_calls += calls
            capture.late_symbolic += symbolic(gm)
            return compiler_fn(gm, example_inputs)
        if recorder is not None:
            with in_harness():
                recorder.on_backend(gm, example_inputs)
        capture.frames += 1
        capture.graphs.append(gm.code)
        capture.bodies.append(called)
        capture.invoke_subgraph_calls += calls
        return compiler_fn(gm, example_inputs)

    backend.__name__ = getattr(compiler_fn, "__name__", "backend")  # named in Dynamo's errors
    return backend



# Where convert_frame asks why a frame recompiles (singular in torch 2.6).
RECOMPILE_REASONS = ("get_and_maybe_log_recompilation_reasons", "get_and_maybe_log_recompilation_reason")


@contextlib.contextmanager
def recording_recompiles(reasons: list[str]) -> Iterator[None]:
    """Dynamo's own reasons for each recompile, as it would log them."""
    name = next(n for n in RECOMPILE_REASONS if hasattr(convert_frame, n))
    original = getattr(convert_frame, name)

    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = original(*args, **kwargs)
        reasons.extend(found)
        return found

    setattr(convert_frame, name, wrapper)
    try:
        yield
    finally:
        setattr(convert_frame, name, original)


# The module whose ``hc_log`` (the "hierarchical_compile" logging artifact) tells each nested-region
# body's reuse: a cache hit, or why not (torch/_dynamo/variables/invoke_subgraph.py).
REUSE_LOGGER_OWNER = "torch._dynamo.variables.invoke_subgraph"


class _Kept(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a message that cannot be formatted is not ours to raise
            self.into.append(record.getMessage())


@contextlib.contextmanager
def recording_reuse(capture: Capture) -> Iterator[None]:
    """Dynamo's reuse decisions for nested_compile_region bodies while the block runs, in
    ``capture.reuse_log``, without printing them; left None where this torch logs none (no ``hc_log``)."""
    try:
        logger = getattr(importlib.import_module(REUSE_LOGGER_OWNER), "hc_log", None)
    except ImportError:
        logger = None
    if not isinstance(logger, logging.Logger):
        yield
        return
    capture.reuse_log = []
    handler, level, propagate = _Kept(capture.reuse_log), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
