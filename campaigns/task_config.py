"""A task's run configuration as the plain dict a worker receives, and the run one judgment needs."""

from __future__ import annotations

from dataclasses import asdict, replace

from harness.outcome import RunConfig
from oracles.registry import ORACLES


def config_from(d: dict) -> RunConfig:
    return RunConfig(**{**d, "companions": tuple(d.get("companions", ())),
                        "torch_config": tuple(tuple(p) for p in d.get("torch_config", ())),
                        "precision": tuple(tuple(p) for p in d.get("precision", ())),
                        "dtypes": tuple(d.get("dtypes", ())), "changes": tuple(d.get("changes", ()))})


def config_to(config: RunConfig) -> dict:
    return asdict(config)


def needing(config: RunConfig, names: tuple) -> RunConfig:
    """A run for ``names`` alone: only the companions, changed calls and recorder they read."""
    chosen = [ORACLES[n] for n in names]
    return replace(config, companions=tuple(dict.fromkeys(c for o in chosen for c in o.needs)),
                   variants=config.variants if any(o.variants for o in chosen) else 0,
                   record_structure=config.record_structure and any(o.structure for o in chosen))
