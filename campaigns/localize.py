"""Localization: which layer of the stack first shows a failure.

The program is re-run down the backend ladder, each rung adding one layer on
top of the Dynamo graph, and once more with deduplication off on the backend
that failed. The first rung that fails the same way names the layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from oracles.registry import ORACLES

from harness.pipeline import run_program

from reports.triage import Finding, alike, fails_alike

# (backend, the layer it adds on top of the previous rung)
LADDER: tuple[tuple[str, str], ...] = (
    ("eager", "Dynamo graph (capture and the dedup pass; run by the FX interpreter)"),
    ("aot_eager", "AOTAutograd (functionalization, joint graph, invoke_subgraph tracing)"),
    ("aot_eager_decomp_partition", "inductor's decompositions and the min-cut partitioner"),
    ("inductor", "inductor codegen"),
)


@dataclass(frozen=True)
class Localization:
    layer: str  # the first failing rung's backend, or "" if none reproduces it
    description: str
    ladder: dict[str, bool]  # backend -> failed alike (rungs above the first failure are not run)
    without_dedup: bool  # still fails alike with deduplication off (on ``layer``'s backend)
    masked: dict[str, str] = field(default_factory=dict)  # rung -> how it failed otherwise

    def summary(self) -> str:
        masked = "".join(f"; {b} fails otherwise ({how}), which may hide it there" for b, how in self.masked.items())
        if not self.layer:
            return f"not reproduced on the backend ladder (a user backend's own layer){masked}"
        blame = "the dedup pass or its interaction with this layer" if not self.without_dedup else "this layer, with or without dedup"
        return f"layer {blamed(self.layer, self.without_dedup)}: first fails on {self.layer}: {self.description}; {blame}{masked}"


# Where a third-party backend's ladder stops before the backend itself: torch's
# own stack as far as a backend compiler is handed a graph.
REFERENCE = "aot_eager"
OWN_LAYER = "the backend itself (its own compiler and runtime), not torch"


def rungs(upto: str | None = None) -> tuple[tuple[str, str], ...]:
    """The rungs up to ``upto``'s; for a backend off the ladder, torch's rungs
    up to aot_eager and then the backend itself (all of torch's for none)."""
    names = [b for b, _ in LADDER]
    if upto is None:
        return LADDER
    if upto in names:
        return LADDER[: names.index(upto) + 1]
    return (*LADDER[: names.index(REFERENCE) + 1], (upto, OWN_LAYER))


def blamed(layer: str, without_dedup: bool) -> str:
    """The layer a finding belongs to, in one word a triager sorts by."""
    if not layer:
        return "unknown"
    if not without_dedup:
        return "dedup"
    return {"eager": "dynamo", "aot_eager": "aot_autograd", "aot_eager_decomp_partition": "decompositions",
            "inductor": "inductor"}.get(layer, "backend")


def localize(finding: Finding, upto: str | None = None) -> Localization:
    """``upto``: stop at this backend's rung (a campaign on aot_eager need not
    pay for inductor builds to localize its findings)."""
    oracle = ORACLES[finding.verdict.oracle]
    config = replace(finding.config, companions=oracle.needs)
    ladder: dict[str, bool] = {}
    masked: dict[str, str] = {}
    like = finding.verdict
    for backend, description in rungs(upto):
        verdict = oracle(run_program(finding.program, replace(config, backend=backend)))
        ladder[backend] = alike(verdict, like)
        if ladder[backend]:
            off = fails_alike(finding.program, replace(config, backend=backend, dedup=False), oracle, like)
            return Localization(backend, description, ladder, off, masked)
        if verdict.failed:
            masked[backend] = f"{verdict.kind}: {verdict.message[:80]}"
    return Localization("", "", ladder, False, masked)
