"""Localization: which layer of the stack first shows a failure.

The program is re-run down the backend ladder, each rung adding one layer on
top of the Dynamo graph, and once more with deduplication off on the backend
that failed. The first rung that fails the same way names the layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from oracles.registry import ORACLES

from .triage import Finding, _fails_alike

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

    def summary(self) -> str:
        if not self.layer:
            return "not reproduced on the backend ladder (a user backend's own layer)"
        blame = "the dedup pass or its interaction with this layer" if not self.without_dedup else "this layer, with or without dedup"
        return f"first fails on {self.layer}: {self.description}; {blame}"


def localize(finding: Finding) -> Localization:
    oracle = ORACLES[finding.verdict.oracle]
    config = replace(finding.config, companions=oracle.needs)
    ladder: dict[str, bool] = {}
    for backend, description in LADDER:
        ladder[backend] = _fails_alike(finding.program, replace(config, backend=backend), oracle, finding.verdict)
        if ladder[backend]:
            off = _fails_alike(finding.program, replace(config, backend=backend, dedup=False), oracle, finding.verdict)
            return Localization(backend, description, ladder, off)
    return Localization("", "", ladder, False)
