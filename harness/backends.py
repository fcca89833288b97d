"""Backends as a catalogue: a name maps to how ``torch.compile`` is called.

Built-in names are entries here; any other backend is ``package.module:callable``.
Resolution happens before any program runs, so a bad name is one clear line.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
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

    def compiler_fn(self) -> Callable:
        """The callable Dynamo hands each captured graph to."""
        if callable(self.backend):
            return self.backend
        import torch._dynamo

        return torch._dynamo.lookup_backend(self.backend)


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
            # Random ops draw from eager's generator, as torch's accuracy checks do,
            # so dropout under a fixed seed is comparable with eager; and a
            # downcast inside a fused kernel rounds like eager does (by default
            # inductor keeps the wider value, a documented difference, not a bug).
            inductor_config={"fallback_random": True, "emulate_precision_casts": True},
        ),
    ]
}


def resolve(spec: str) -> Backend:
    if spec in BUILTIN:
        return BUILTIN[spec]
    if ":" not in spec:
        known = ", ".join(BUILTIN)
        raise BackendError(f"unknown backend {spec!r}: use one of {known}, or package.module:callable")
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any import-time failure of a plugin is the user's to fix
        raise BackendError(f"backend {spec!r}: cannot import {module_name!r}: {type(e).__name__}: {e}") from e
    fn = getattr(module, attr, None)
    if fn is None:
        raise BackendError(f"backend {spec!r}: module {module_name!r} has no attribute {attr!r}")
    if not callable(fn):
        raise BackendError(f"backend {spec!r}: {attr!r} is a {type(fn).__name__}, not a callable")
    return Backend(spec, fn, description="user backend")
