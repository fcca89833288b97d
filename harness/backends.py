"""Backends as a catalogue: a name maps to how ``torch.compile`` is called.

Built-in names are entries here; a plugin is ``package.module:callable`` or a
name registered in the ``dedup_harness.backends`` entry-point group (or in
torch's own ``torch_dynamo_backends`` group). Resolution happens before any
program runs, so a bad name is one clear line.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable


class BackendError(ValueError):
    """An unusable backend spec; the message is meant to be shown as it is."""


@dataclass(frozen=True)
class Backend:
    name: str
    backend: str | Callable  # what torch.compile's ``backend=`` receives
    options: dict[str, Any] = field(default_factory=dict)  # further torch.compile kwargs
    description: str = ""
    # torch._inductor.config settings while compiling and running
    inductor_config: dict[str, Any] = field(default_factory=dict)
    # Runs the same kernels whether or not part of the graph is a subgraph
    # call, so forward values with and without deduplication agree bitwise.
    bitwise: bool = False
    # How a standalone repro gets this backend: a torch backend name, or
    # "package.module:callable" that the repro imports.
    spec: str = ""
    # For a backend that replays CUDA graphs: the same compiler without them,
    # which a graphed run is compared with (harness.replay).
    plain: str = ""

    @property
    def repro_spec(self) -> str:
        return self.spec or (self.backend if isinstance(self.backend, str) else self.name)

    def compiler_fn(self) -> Callable:
        """The callable Dynamo hands each captured graph to."""
        if callable(self.backend):
            return self.backend
        import torch._dynamo

        return torch._dynamo.lookup_backend(self.backend)


# Random ops draw from eager's generator, as torch's accuracy checks do, so
# dropout under a fixed seed is comparable with eager; and a downcast inside a
# fused kernel rounds like eager does (by default inductor keeps the wider
# value, a documented difference, not a bug).
INDUCTOR_ACCURACY = {"fallback_random": True, "emulate_precision_casts": True}
REDUCE_OVERHEAD = {"triton.cudagraphs": True}  # torch._inductor.list_mode_options("reduce-overhead")

BUILTIN: dict[str, Backend] = {
    b.name: b
    for b in [
        Backend("eager", "eager", description="Dynamo graph run by the FX interpreter", bitwise=True),
        Backend("aot_eager", "aot_eager", description="AOTAutograd, no codegen (the default)", bitwise=True),
        Backend(
            "aot_eager_decomp_partition",
            "aot_eager_decomp_partition",
            description="AOTAutograd with inductor's decompositions and partitioner",
            bitwise=True,
        ),
        Backend(
            "inductor",
            "inductor",
            description="Inductor codegen (C++ on CPU)",
            inductor_config=INDUCTOR_ACCURACY,
        ),
        # mode="reduce-overhead" is inductor's config patch below: torch.compile
        # passes a mode only to the inductor it names itself, and the harness
        # hands Dynamo a wrapped callable (compile_fx takes no mode argument).
        Backend(
            "reduce-overhead",
            "inductor",
            description="Inductor with CUDA graphs (mode='reduce-overhead'); on CPU, plain inductor",
            inductor_config={**INDUCTOR_ACCURACY, **REDUCE_OVERHEAD},
            plain="inductor",
        ),
        Backend("cudagraphs", "cudagraphs", description="AOTAutograd + CUDA graph replay; skips CPU graphs",
                plain="aot_eager"),
    ]
}

ENTRY_POINT_GROUP = "dedup_harness.backends"


def plugins() -> dict[str, str]:
    """Backends other packages register: name -> "package.module:callable"."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    return [*BUILTIN, *sorted(plugins())]


def resolve(spec: str) -> Backend:
    if spec in BUILTIN:
        return BUILTIN[spec]
    registered = plugins()
    if spec in registered:
        return replace(_load(registered[spec], f"entry point {spec!r} ({registered[spec]})"), name=spec)
    if ":" not in spec:
        import torch._dynamo

        if spec in torch._dynamo.list_backends(exclude_tags=()):  # torch's own registry
            return Backend(spec, spec, description="torch backend")
        raise BackendError(f"unknown backend {spec!r}: use one of {', '.join(names())}, or package.module:callable")
    return _load(spec, f"backend {spec!r}")


def _load(spec: str, what: str) -> Backend:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any import-time failure of a plugin is the user's to fix
        raise BackendError(f"{what}: cannot import {module_name!r}: {type(e).__name__}: {e}") from e
    fn = getattr(module, attr, None)
    if fn is None:
        raise BackendError(f"{what}: module {module_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise BackendError(f"{what}: {attr!r} is a {type(fn).__name__}, not a callable")
    return Backend(spec, fn, description=(fn.__doc__ or "user backend").strip().splitlines()[0], spec=spec)
