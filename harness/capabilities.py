"""What this torch offers of what the harness uses, found by asking torch.

The harness claims every release from the first with the deduplication pass
(2.6) to the newest; each lacks some of what later ones have. Nothing here
compares version strings: each capability is a question put to the installed
torch, and what goes missing without it is said once (the campaign report's
"unavailable on this torch" line), never by an oracle going quiet.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable


def _optimize_takes_guard_filter_fn() -> bool:
    # before it, torch.compile hands options={"guard_filter_fn": ...} to the
    # backend, which then fails on the unexpected keyword
    from torch._dynamo import eval_frame

    optimize = getattr(eval_frame, "_optimize", None)
    return optimize is not None and "guard_filter_fn" in inspect.signature(optimize).parameters


def _has_nested_compile_region() -> bool:
    import torch

    return hasattr(torch.compiler, "nested_compile_region")


def _has_graph_deduplication() -> bool:
    import torch._dynamo.config

    return hasattr(torch._dynamo.config, "use_graph_deduplication")


def _tracks_node_mutations() -> bool:
    from torch._dynamo.graph_region_tracker import GraphRegionTracker

    return hasattr(GraphRegionTracker, "track_node_mutations")


def _has_dedup_lint() -> bool:
    import torch._dynamo.config

    return hasattr(torch._dynamo.config, "graph_deduplication_lint")


def recompile_limit_name(config: Any = None) -> str:
    """The Dynamo config that caps recompiles of one frame: recompile_limit,
    named cache_size_limit in torch 2.6."""
    if config is None:
        import torch._dynamo.config as config
    return next(n for n in ("recompile_limit", "cache_size_limit") if hasattr(config, n))


def _resolves(path: str) -> bool:
    """Whether the dotted ``path`` names something in this torch."""
    import importlib

    parts = path.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 2):
        obj = getattr(obj, part, None)
        if obj is None:
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                return False
    return True


# What each door of generators.doors needs of torch (its operator or API).
DOOR_NEEDS: dict[str, tuple[str, ...]] = {
    "transform:grad": ("torch.func.grad",), "transform:vjp": ("torch.func.vjp",),
    "transform:jacrev": ("torch.func.jacrev",), "transform:vmap": ("torch.func.vmap",),
    "transform:vmap_each": ("torch.func.vmap",),
    "transform:functional_call": ("torch.func.functional_call",),
    "checkpoint:non_reentrant": ("torch.utils.checkpoint.checkpoint",),
    "checkpoint:reentrant": ("torch.utils.checkpoint.checkpoint",),
    "checkpoint:selective": ("torch.utils.checkpoint.create_selective_checkpoint_contexts",),
    "control_flow:cond": ("torch.cond",), "control_flow:while_loop": ("torch._higher_order_ops.while_loop",),
    "control_flow:map": ("torch._higher_order_ops.map",), "control_flow:scan": ("torch._higher_order_ops.scan",),
    "export:strict": ("torch.export.export",), "export:non_strict": ("torch.export.export",),
    "export:unflatten": ("torch.export.unflatten",), "export:compile": ("torch.export.export",),
    "cache:warm": ("torch._inductor.config.fx_graph_cache", "torch._functorch.config.enable_autograd_cache"),
    "dynamic:dynamic": ("torch.compile",), "dynamic:mark": ("torch._dynamo.mark_dynamic",),
    "dynamic:maybe_mark": ("torch._dynamo.maybe_mark_dynamic",),
    "dynamic:unbacked": ("torch._dynamo.config.capture_scalar_outputs",
                         "torch._dynamo.config.capture_dynamic_output_shape_ops"),
}


def _has_cuda_device() -> bool:
    import torch

    return torch.cuda.is_available()


@dataclass(frozen=True)
class Capability:
    name: str
    detect: Callable[[], bool]
    lost: str  # what the harness cannot do without it
    of_torch: bool = True  # a feature of the torch release (a campaign's "unavailable on this torch" line), not
    # of the machine it runs on


CATALOGUE: tuple[Capability, ...] = (
    Capability("graph_deduplication", _has_graph_deduplication,
               "the pass under test (torch._dynamo.config.use_graph_deduplication): nothing to test"),
    Capability("guard_filter_fn", _optimize_takes_guard_filter_fn,
               "guard recording: the dedup on/off guard comparison (dedup_toggle, guards) is not made"),
    Capability("nested_compile_region", _has_nested_compile_region,
               "torch.compiler.nested_compile_region: no program decorates its blocks; the compile_region oracle has "
               "nothing to judge"),
    Capability("node_mutation_tracking", _tracks_node_mutations,
               "the region tracker's mutation tracking: nothing of the harness needs it (noted for triage)"),
    Capability("graph_deduplication_lint", _has_dedup_lint,
               "the pass's own lint (--lint-share): programs compile without it"),
    Capability("cuda", _has_cuda_device, "a CUDA device (torch.cuda.is_available() is False here): CUDA-graph replays "
               "on cuda are not run", of_torch=False),
)
CATALOGUE += tuple(
    Capability(f"door:{door}", lambda paths=paths: all(_resolves(p) for p in paths),
               f"the {door} door ({', '.join(paths)}): programs are not reached through it")
    for door, paths in DOOR_NEEDS.items())
BY_NAME = {c.name: c for c in CATALOGUE}


@lru_cache(maxsize=None)
def has(name: str) -> bool:
    """Whether this torch has capability ``name`` (a failing probe: it has not)."""
    detect = BY_NAME[name].detect  # an unknown name is the caller's error
    try:
        return bool(detect())
    except Exception:
        return False


@lru_cache(maxsize=None)
def guard_kinds() -> tuple[str, ...]:
    """The kinds of guard this torch's Dynamo can build: GuardBuilder's methods named in capitals
    (``TENSOR_MATCH``, ``EQUALS_MATCH``, ...), as ``guard_filter_fn`` entries name their ``guard_type``."""
    try:
        from torch._dynamo.guards import GuardBuilder
    except ImportError:
        return ()
    return tuple(sorted(n for n in dir(GuardBuilder) if n.isupper() and callable(getattr(GuardBuilder, n))))


def unavailable() -> dict[str, str]:
    """Each capability this torch lacks, with what the harness loses."""
    return {c.name: c.lost for c in CATALOGUE if c.of_torch and not has(c.name)}
