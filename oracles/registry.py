"""The oracle catalogue: adding an oracle is one entry.

Each entry names the companion runs it compares with (``harness.pipeline.
COMPANIONS``) and its severity: "wrong" findings are miscompilations or
broken promises; "missed" findings are optimizations the pass should have
made (reported apart, never mixed with wrong results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from harness.outcome import Outcome

from . import completeness, dedup_toggle, determinism, differential, graph_validity, hygiene, region_identity, rewrite
from .verdict import Verdict


@dataclass(frozen=True)
class Oracle:
    name: str
    check: Callable[[Outcome], Verdict]
    needs: tuple[str, ...] = ()
    severity: str = "wrong"

    def __call__(self, outcome: Outcome) -> Verdict:
        return self.check(outcome)


ORACLES: dict[str, Oracle] = {
    o.name: o
    for o in [
        Oracle(differential.NAME, differential.check),
        Oracle(hygiene.NAME, hygiene.check),
        Oracle(region_identity.NAME, region_identity.check),
        Oracle(rewrite.NAME, rewrite.check),
        Oracle(graph_validity.NAME, graph_validity.check),
        Oracle(dedup_toggle.NAME, dedup_toggle.check, needs=dedup_toggle.NEEDS),
        Oracle(determinism.NAME, determinism.check, needs=determinism.NEEDS),
        Oracle(completeness.NAME, completeness.check, severity="missed"),
    ]
}


def companions(names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The companion runs the named oracles (default: all) need."""
    needed: list[str] = []
    for n in names or tuple(ORACLES):
        needed += [c for c in ORACLES[n].needs if c not in needed]
    return tuple(needed)


def judge(outcome: Outcome, names: tuple[str, ...] | None = None) -> list[Verdict]:
    return [ORACLES[n](outcome) for n in (names or tuple(ORACLES))]
