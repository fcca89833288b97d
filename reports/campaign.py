"""A fuzz campaign: draw programs, run them, judge them, triage and report.

This is the composition root that ``python -m harness fuzz`` calls. Results
are written as they arrive (``findings.jsonl`` and one folder per distinct
finding), so a campaign killed part-way keeps everything it found.
"""

from __future__ import annotations

import json
import platform
import re
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch
from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

from generators.ir import Program, to_dict
from generators.strategies import programs
from harness.backends import resolve
from harness.outcome import RunConfig
from harness.pipeline import InvalidProgram, run_program
from oracles import guards
from oracles.registry import ORACLES, judge, run_config

from .known_issues import match
from .localize import localize
from .repro import driver_for, render_repro
from .triage import Finding, triage

BATCH = 25


@dataclass
class Campaign:
    out: Path
    config: RunConfig
    oracles: tuple[str, ...]
    started: float = field(default_factory=time.time)
    programs: int = 0
    deduplicated: int = 0
    statuses: Counter = field(default_factory=Counter)
    stage_seconds: Counter = field(default_factory=Counter)  # pipeline stage -> total seconds
    hits: Counter = field(default_factory=Counter)
    findings: dict[str, dict] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    # changed re-calls (guard oracles): run per kind, recompiled per kind, programs with >= 3 run
    changed_calls: Counter = field(default_factory=Counter)
    recompiled: Counter = field(default_factory=Counter)
    programs_with_3_changes: int = 0
    aborted: str = ""  # why the campaign stopped before its budget, if it did

    def record(self, program: Program) -> None:
        try:
            outcome = run_program(program, self.config)
        except InvalidProgram as e:  # a generator bug, kept apart from compiler findings
            self.log({"event": "invalid_program", "error": str(e), "program": to_dict(program)})
            self.statuses["invalid_program"] += 1
            return
        self.programs += 1
        self.stage_seconds.update(outcome.seconds)
        ran = guards.judged_runs(outcome)[0]
        self.changed_calls.update(r.variant["kind"] for r in ran)
        self.recompiled.update(r.variant["kind"] for r in ran if r.recompiled)
        self.programs_with_3_changes += len(ran) >= 3
        self.deduplicated += outcome.capture.deduplicated
        for verdict in judge(outcome, self.oracles):
            self.statuses[verdict.status.value] += 1
            if verdict.failed:
                self._finding(triage(outcome, verdict), outcome.capture.graphs)

    def _finding(self, finding: Finding, graphs: list[str]) -> None:
        sig = finding.signature
        self.hits[sig] += 1
        known = match(sig)
        if sig not in self.findings:
            self.findings[sig] = {
                "signature": sig, "oracle": finding.verdict.oracle, "kind": finding.verdict.kind,
                "severity": ORACLES[finding.verdict.oracle].severity,
                "culprit": finding.culprit, "known_issue": known.id if known else None,
                "first_seen": time.strftime("%Y-%m-%dT%H:%M:%S"), "folder": f"findings/{_slug(sig)}",
                "size": None, "layer": localize(finding).summary(),
            }
        entry = self.findings[sig]
        entry["count"] = self.hits[sig]
        size = len(finding.program.block.body) * len(finding.program.repeats())
        if entry["size"] is None or size < entry["size"]:  # keep the smallest program that hits it
            entry["size"] = size
            self._write_folder(entry, finding, graphs)
        self.log({"event": "finding", "signature": sig, "known_issue": entry["known_issue"], "message": str(finding.verdict)})
        (self.out / entry["folder"] / "meta.json").write_text(json.dumps(self._meta(entry), indent=2))

    def _write_folder(self, entry: dict, finding: Finding, graphs: list[str]) -> None:
        folder = self.out / entry["folder"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "program.json").write_text(json.dumps(to_dict(finding.program), indent=2))
        check, variant = driver_for(finding.verdict.details, entry["severity"])
        (folder / "repro.py").write_text(render_repro(finding.program, finding.config, entry["signature"], check, variant))
        log = [str(finding.verdict), f"localization: {entry['layer']}", "", json.dumps(finding.verdict.details, indent=2, default=str), "",
               "# source", finding.source, "# Dynamo graphs after deduplication", *graphs]
        (folder / "log.txt").write_text("\n".join(log))

    def _meta(self, entry: dict) -> dict:
        return {**entry, "backend": self.config.backend, "torch": torch.__version__,
                "config": {"use_graph_deduplication": self.config.dedup}}

    def log(self, event: dict) -> None:
        with open(self.out / "findings.jsonl", "a") as f:
            f.write(json.dumps({"time": round(time.time() - self.started, 3), **event}, default=str) + "\n")

    def summary(self) -> dict:
        elapsed = time.time() - self.started
        return {
            "programs": self.programs,
            "seconds": round(elapsed, 1),
            "programs_per_second": round(self.programs / elapsed, 3) if elapsed else 0.0,
            "deduplicated_share": round(self.deduplicated / self.programs, 3) if self.programs else 0.0,
            # where the time goes, per program: eager runs, the compile under test,
            # companion compiles; the rest is triage and localization of failures
            "seconds_per_program": {k: round(v / self.programs, 3) for k, v in self.stage_seconds.items()}
            if self.programs else {},
            "verdicts": dict(self.statuses),
            "changed_calls": {"run": dict(self.changed_calls), "recompiled": dict(self.recompiled),
                              "programs_with_3": self.programs_with_3_changes,
                              "per_program": self.config.variants},
            "backend": self.config.backend,
            "oracles": list(self.oracles),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "findings": sorted(self.findings.values(), key=lambda e: -e["count"]),
            "aborted": self.aborted,
        }


def process_healthy() -> bool:
    """Whether plain eager tensor code still works in this process."""
    try:
        torch.randn(1, 2).expand(3, 2).sum().item()
        return True
    except Exception:
        return False


def _slug(signature: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", signature).strip("-")[:80]


def _markdown(s: dict) -> str:
    lines = [
        f"# Fuzz campaign: {s['backend']} on torch {s['torch']}", "",
        f"{s['programs']} programs in {s['seconds']} s ({s['programs_per_second']}/s); "
        f"{s['deduplicated_share']:.0%} produced invoke_subgraph regions. Verdicts: {s['verdicts']}.", "",
        f"Seconds per program by stage: {s.get('seconds_per_program', {})} (the rest: triage and localization).", "",
    ]
    for severity, title in SEVERITIES.items():
        rows = [f for f in s["findings"] if f.get("severity", "wrong") == severity]
        lines += [f"## {title}", "", "| signature | hits | known issue | first failing layer | repro |",
                  "|---|---|---|---|---|"]
        for f in rows:
            lines.append(f"| `{f['signature']}` | {f['count']} | {f['known_issue'] or '**NEW**'} | "
                         f"{f.get('layer', '')} | `{f['folder']}/repro.py` |")
        if not rows:
            lines.append("| (none) | | | | |")
        lines.append("")
    return "\n".join(lines)


SEVERITIES = {
    "wrong": "Wrong results and broken promises",
    "missed": "Missed optimizations",
    "recompile": "Unneeded recompiles",
}


def run(backend: str, budget: float, seed: int, out: Path, oracle_names: Optional[tuple[str, ...]] = None,
        progress: Callable[[str], None] = print, variants: Optional[int] = None) -> dict:
    resolve(backend)  # a bad backend fails here, before anything runs
    oracle_names = oracle_names or tuple(ORACLES)
    unknown = [o for o in oracle_names if o not in ORACLES]
    if unknown:
        raise ValueError(f"unknown oracle(s) {', '.join(unknown)}: use {', '.join(ORACLES)}")
    out.mkdir(parents=True, exist_ok=True)
    campaign = Campaign(out, run_config(backend, oracle_names, variants=variants), oracle_names)
    deadline = campaign.started + budget
    last_print = [time.time()]

    previous: list[str] = [""]

    def body(program: Program) -> None:
        key = program.to_json()
        if time.time() >= deadline or key in campaign.seen or campaign.aborted:
            return
        campaign.seen.add(key)
        try:
            campaign.record(program)
        except Exception:  # a harness bug must not lose the campaign
            campaign.log({"event": "harness_error", "traceback": traceback.format_exc()})
            campaign.statuses["harness_error"] += 1
            if not process_healthy():
                # The compiler under test left this process unusable (seen:
                # "PythonDispatcherTLS was not set" after a failed compile).
                # Everything after would be noise: stop, keeping the results.
                campaign.aborted = "process state corrupted; see poisoned_by.json"
                (out / "poisoned_by.json").write_text(json.dumps({"previous": previous[0], "current": key}))
                campaign.log({"event": "process_poisoned", "previous_program": previous[0], "program": key})
        previous[0] = key
        if time.time() - last_print[0] > 10:
            last_print[0] = time.time()
            progress(f"[{time.time() - campaign.started:5.0f}s] {campaign.programs} programs, "
                     f"{sum(campaign.hits.values())} failures in {len(campaign.findings)} distinct findings")

    batch = 0
    while time.time() < deadline and not campaign.aborted:
        test = settings(max_examples=BATCH, database=None, deadline=None, phases=[Phase.generate],
                        suppress_health_check=list(HealthCheck))(given(programs())(body))
        hyp_seed(seed * 100_003 + batch)(test)()
        batch += 1
        s = campaign.summary()
        (out / "summary.json").write_text(json.dumps(s, indent=2))
        (out / "report.md").write_text(_markdown(s))
    return campaign.summary()
