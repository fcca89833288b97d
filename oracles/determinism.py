"""Determinism: capturing the same program twice yields the same region
groups and the same post-deduplication graphs (a pass whose output depends on
hash or dict order makes every other finding unreproducible)."""

from __future__ import annotations

from harness.outcome import Outcome
from harness.structure import region_nodes

from .verdict import Status, Verdict

NAME = "determinism"
NEEDS = ("recapture",)


def _groups(capture) -> list:
    return [region_nodes(r.groups) for r in capture.structure]


def check(outcome: Outcome) -> Verdict:
    if "recapture" in outcome.spared:
        return Verdict(NAME, Status.PASS, message=f"not captured again: {outcome.spared['recapture']}")
    again = outcome.companions.get("recapture")
    if again is None:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="not_run", message="the program was captured once")
    first, second = outcome.capture, again[1]
    if outcome.compiled.failure is not None or again[0].failure is not None:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="crash", message="a capture failed")
    a, b = _groups(first), _groups(second)
    if a != b:
        where = next(i for i, (x, y) in enumerate(zip(a + [None], b + [None])) if x != y)
        return Verdict(NAME, Status.FAIL, kind="region_groups", where=f"graph[{where}]",
                       message=f"region groups differ between two captures: {_summary(a, where)} vs {_summary(b, where)}",
                       details={"label": "region_groups"})
    for i, (x, y) in enumerate(zip(first.graphs, second.graphs)):
        if x != y:
            return Verdict(NAME, Status.FAIL, kind="graph", where=f"graph[{i}]",
                           message="the post-deduplication graph differs between two captures",
                           details={"first": x, "second": y, "label": "graph"})
    if len(first.graphs) != len(second.graphs):
        return Verdict(NAME, Status.FAIL, kind="graph", where="graphs",
                       message=f"{len(first.graphs)} graphs, then {len(second.graphs)}", details={"label": "graph"})
    return Verdict(NAME, Status.PASS, message=f"{len(first.graphs)} graphs captured identically twice")


def _summary(groups: list, index: int) -> str:
    if index >= len(groups):
        return "no graph"
    return str([[[n.name for n in region] for region in g] for g in groups[index]])[:300]
