"""The oracle catalogue: adding an oracle is one entry.

Each entry names the companion runs it compares with (``harness.pipeline.
COMPANIONS``, or ``PROGRAM_COMPANIONS``: compiles of twins of the program)
and its severity: "wrong" findings are miscompilations or broken promises;
"missed" findings are optimizations the pass should have made (reported
apart, never mixed with wrong results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from harness.backend_capabilities import FLOATS, probe, program_mode, resolve_mode
from harness.outcome import Outcome, RunConfig

from . import (autograd_trace, compile_region, completeness, cudagraph, dedup_toggle, determinism, differential, door,
               graph_validity, guards, hygiene, region_identity, region_reuse, rewrite)
from .verdict import Verdict


@dataclass(frozen=True)
class Oracle:
    name: str
    check: Callable[[Outcome], Verdict]
    needs: tuple[str, ...] = ()
    severity: str = "wrong"
    variants: int = 0  # changed re-calls of the compiled program it reads (harness.recall)
    structure: bool = True  # reads Capture.structure (harness.structure's recorder); False: never
    # (companion, verdict kinds): a companion of ``needs`` only failures of these kinds are judged by, so triage's
    # re-runs of a failure of another kind are not made with it
    needs_only_for: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __call__(self, outcome: Outcome) -> Verdict:
        return self.check(outcome)

    def needs_for(self, kind: str) -> tuple[str, ...]:
        """The companions a re-run judged for a failure of ``kind`` must have."""
        only = dict(self.needs_only_for)
        return tuple(c for c in self.needs if c not in only or kind in only[c])


ORACLES: dict[str, Oracle] = {
    o.name: o
    for o in [
        Oracle(differential.NAME, differential.check, structure=False),
        Oracle(autograd_trace.NAME, autograd_trace.check, structure=False),
        Oracle(hygiene.NAME, hygiene.check, structure=False),
        Oracle(region_identity.NAME, region_identity.check),
        Oracle(rewrite.NAME, rewrite.check),
        Oracle(graph_validity.NAME, graph_validity.check),
        Oracle(dedup_toggle.NAME, dedup_toggle.check, needs=dedup_toggle.NEEDS, structure=False,
               needs_only_for=dedup_toggle.NEEDS_ONLY_FOR),
        Oracle(determinism.NAME, determinism.check, needs=determinism.NEEDS),
        # twins with nested_compile_region removed or moved: compiled only for
        # programs that have one (harness.pipeline.PROGRAM_COMPANIONS)
        Oracle(compile_region.NAME, compile_region.check, needs=compile_region.NEEDS, structure=False),
        Oracle(completeness.NAME, completeness.check, severity="missed"),
        Oracle(region_reuse.NAME, region_reuse.check, needs=region_reuse.NEEDS, severity="missed", structure=False),
        Oracle(guards.NAME, guards.check, needs=guards.NEEDS, variants=guards.VARIANTS, structure=False),
        Oracle(guards.RECOMPILES, guards.check_recompiles, severity="recompile", variants=guards.VARIANTS,
               structure=False),
    ]
}


# Oracles of a CUDA-graph replay run (harness.replay.ReplayOutcome): a run of
# its own (many calls, on a CUDA device), not a companion of the main one.
# "skip" verdicts say whether CUDA graphs engaged; they are counted, never findings.
REPLAY_ORACLES: dict[str, Oracle] = {
    o.name: o
    for o in [
        Oracle(cudagraph.NAME, cudagraph.check, structure=False),
        Oracle(cudagraph.ENGAGED, cudagraph.check_engaged, severity="skip", structure=False),
    ]
}


# Oracles of a door run (harness.doors.DoorOutcome): the program reached
# through its door (generators.doors), a run of its own next to the main one,
# for programs that have a door.
DOOR_ORACLES: dict[str, Oracle] = {
    o.name: o
    for o in [
        Oracle(door.NAME, door.check, structure=False),
        Oracle(door.CACHE, door.check_cache, severity="missed", structure=False),
    ]
}


def companions(names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The companion runs the named oracles (default: all) need."""
    needed: list[str] = []
    for n in names or tuple(ORACLES):
        needed += [c for c in ORACLES[n].needs if c not in needed]
    return tuple(needed)


def run_config(backend: str = "aot_eager", names: tuple[str, ...] | None = None, variants: int | None = None,
               mode: str = "auto", **kwargs) -> RunConfig:
    """The run the named oracles (default: all of ``ORACLES``) need on
    ``backend``; ``variants`` overrides how many changed re-calls they get
    (-1: all). The pass is recorded only if one of them reads what the
    recorder keeps. Replay oracles among ``names`` ask nothing of this run.
    ``mode`` "auto": what the backend can do (harness.backend_capabilities):
    forward-only under no_grad where it cannot train, judged at the precision
    it computes in."""
    caps = probe(backend)
    if mode == "auto":
        mode = "train" if caps.training else "no_grad"
    kwargs.setdefault("mode", program_mode(resolve_mode(backend, mode), 0))
    kwargs.setdefault("precision", tuple(sorted(caps.precision.items())))
    kwargs.setdefault("rejects", caps.rejects)
    kwargs.setdefault("dtypes", () if set(caps.dtypes) >= set(FLOATS) else caps.dtypes)
    chosen = tuple(n for n in (names or tuple(ORACLES)) if n in ORACLES)
    wanted = max((ORACLES[n].variants for n in chosen), default=0)
    kwargs.setdefault("record_structure", any(ORACLES[n].structure for n in chosen))
    needed = companions(chosen) if chosen else ()
    return RunConfig(backend=backend, companions=needed,
                     variants=wanted if variants is None or not wanted else variants, **kwargs)


def judge(outcome: Outcome, names: tuple[str, ...] | None = None) -> list[Verdict]:
    return [ORACLES[n](outcome) for n in (names or tuple(ORACLES)) if n in ORACLES]


def judge_replay(replay, names: tuple[str, ...] | None = None) -> list[Verdict]:
    """``harness.replay.ReplayOutcome`` judged by the named replay oracles (default: all)."""
    return [REPLAY_ORACLES[n](replay) for n in (names or tuple(REPLAY_ORACLES)) if n in REPLAY_ORACLES]


def judge_door(run, names: tuple[str, ...] | None = None) -> list[Verdict]:
    """``harness.doors.DoorOutcome`` judged by the named door oracles (default: all)."""
    return [DOOR_ORACLES[n](run) for n in (names or tuple(DOOR_ORACLES)) if n in DOOR_ORACLES]


def severity(name: str) -> str:
    return (ORACLES.get(name) or REPLAY_ORACLES.get(name) or DOOR_ORACLES[name]).severity
