"""A campaign's state is a fold over its event log (``findings.jsonl``).

Events are appended as they happen, so the log alone is the campaign:
resuming folds the log and goes on, ``report merge`` folds several shards'
logs, and every report is rendered from the folded summary.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from . import door_coverage, feedback, guard_coverage, masked, semantic
from .schema import root_causes, thin

LOG = "findings.jsonl"
CHILD_TASKS = ("verify",)  # worker tasks whose torch runs in a child process

# The fields of a finding event that describe the bug, not the hit.
FINDING_FIELDS = ("signature", "oracle", "kind", "severity", "culprit", "known_issue", "message", "driver", "variant", "dedup",
                  "differences", "spellings")


@dataclass
class Ledger:
    started: float = 0.0  # wall time of the first start
    active: float = 0.0  # seconds of earlier invocations (resume), from their stop events
    config: dict = field(default_factory=dict)
    done: set = field(default_factory=set)  # program ids with a result (run, lost or invalid)
    programs: int = 0
    deduplicated: int = 0
    verdicts: Counter = field(default_factory=Counter)
    stage_seconds: Counter = field(default_factory=Counter)
    changed: Counter = field(default_factory=Counter)
    recompiled: Counter = field(default_factory=Counter)
    with_3_changes: int = 0
    features: Counter = field(default_factory=Counter)
    semantic: dict = field(default_factory=dict)  # call-difference entry -> Counter of "<where>:<outcome>"
    cudagraphs: Counter = field(default_factory=Counter)  # replay runs: engaged, or skipped and why
    doors: dict = field(default_factory=dict)  # door -> Counter (reports.door_coverage)
    masked: dict = field(default_factory=dict)  # stage -> Counter of judgments and masked ones (reports.masked)
    guard_kinds: Counter = field(default_factory=Counter)  # programs per guard kind built (reports.guard_coverage)
    feedback: dict = field(default_factory=feedback.new_state)  # a steered campaign's books (reports.feedback)
    lost: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)  # invalid programs, harness errors
    harness_errors: Counter = field(default_factory=Counter)  # by the traceback's last line
    findings: dict = field(default_factory=dict)  # signature -> entry
    timeline: list = field(default_factory=list)  # (t, programs, failures, distinct)
    fingerprints: list = field(default_factory=list)  # finding events triaged in full with a fingerprint
    triage: Counter = field(default_factory=Counter)  # how hits were triaged: full, recalled, sampled, mismatched
    follow_ups: Counter = field(default_factory=Counter)  # distinct findings followed up, or skipped as known
    task_seconds: Counter = field(default_factory=Counter)  # "<type>:total" / "<type>:torch": workers' seconds by task type
    aborted: str = ""
    complete: bool = False  # the last invocation ran out its budget, deadline or program count
    # follow-ups begun or deferred to another shard's claim and not finished: signature -> the job
    # (program, config, what it runs), so a resumed shard can finish or take them over (campaigns.claims)
    open_follow_ups: dict = field(default_factory=dict)
    _opened: float = 0.0  # the start of an invocation with no stop event yet
    _last_at: float = 0.0

    # -- folding -----------------------------------------------------------------

    def apply(self, e: dict) -> None:
        kind, at = e.get("event"), e.get("at", 0.0)
        if kind == "start":
            self.close_open()  # the invocation before ended with no stop event (killed)
            self.started, self._opened = self.started or at, at
            self.config = {**self.config, **e.get("config", {})}
            self.aborted, self.complete = "", False
        elif kind == "stop":
            self.active += e.get("seconds", 0.0)
            self._opened, self.complete = 0.0, bool(e.get("complete"))
        elif kind == "program":
            self.done.add(e["id"])
            self.programs += 1
            self.deduplicated += bool(e.get("deduplicated"))
            self.verdicts.update(e.get("verdicts", {}))
            self.stage_seconds.update(e.get("stages", {}))
            self.changed.update(e.get("changed", []))
            self.recompiled.update(e.get("recompiled", []))
            self.with_3_changes += len(e.get("changed", [])) >= 3
            self.features.update(e.get("features", []))
            semantic.fold(self.semantic, e.get("semantic", {}))
            if e.get("cudagraphs"):
                self.cudagraphs[e["cudagraphs"]] += 1
            door_coverage.fold(self.doors, e.get("door"))
            masked.fold(self.masked, e.get("masked"))
            self.guard_kinds.update(e.get("guard_kinds", []))
            feedback.fold(self.feedback, e, self.started)
        elif kind == "lost":
            self.done.add(e["id"])
            self.lost[e["kind"]] += 1
        elif kind in ("invalid_program", "harness_error"):
            self.done.add(e.get("id"))
            self.errors[kind] += 1
            if kind == "harness_error":  # by the traceback's last line: what the report names
                last = (e.get("traceback") or "").strip().splitlines()
                self.harness_errors[last[-1][:300] if last else "(no traceback)"] += 1
        elif kind == "finding":
            self._finding(e)
            if e.get("fingerprint") and not e.get("recalled"):
                self.fingerprints.append({k: e[k] for k in ("signature", "fingerprint", "expected") if k in e})
            self.triage["recalled" if e.get("recalled") else "full"] += 1
            self.triage.update(k for k, flag in (("sampled", "sampled"), ("mismatched", "expected")) if e.get(flag))
        elif kind == "task":
            self.task_seconds[f"{e['type']}:total"] += e.get("total", 0.0)
            self.task_seconds[f"{e['type']}:torch"] += e.get("torch", 0.0)
            self.task_seconds[f"{e['type']}:tasks"] += 1
        elif kind == "follow_up":
            self.follow_ups["claimed_elsewhere" if e.get("claimed") else "skipped_known" if e.get("skipped") else
                            "sampled_known" if e.get("known_issue") else "new"] += 1
            if e.get("job"):
                self.open_follow_ups[e["signature"]] = e["job"]
        elif kind == "minimize_failed":
            self.open_follow_ups.pop(e["signature"], None)
        elif kind == "minimized":
            entry = self.findings.get(e["signature"])
            if entry is not None:
                entry.update({k: e[k] for k in ("minimized", "size", "layer", "repro_exit", "differences", "spellings")
                              if k in e})
            job = self.open_follow_ups.get(e["signature"])
            if job is not None and ("minimized" in e or not job.get("minimize")):  # a repro run alone ends a verify-only job
                del self.open_follow_ups[e["signature"]]
        elif kind == "aborted":
            self.aborted = e.get("reason", "")
        if kind in ("program", "lost", "finding"):
            self._tick(at)
        self._last_at = max(self._last_at, at)

    def close_open(self) -> None:
        """Count an invocation that left no stop event (killed) as running until its last event."""
        if self._opened:
            self.active += max(0.0, self._last_at - self._opened)
            self._opened = 0.0

    def _finding(self, e: dict) -> None:
        sig = e["signature"]
        entry = self.findings.get(sig)
        if entry is None:
            entry = self.findings[sig] = {
                **{k: e.get(k) for k in FINDING_FIELDS}, "count": 0, "size": e.get("size"), "layer": e.get("layer", ""),
                "first_seen": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(e.get("at", 0))),
                "folder": e.get("folder"), "minimized": False, "repro_exit": None, "program_id": e.get("id"),
            }
        entry["count"] += e.get("count", 1)
        if e.get("size") is not None and (entry["size"] is None or e["size"] < entry["size"]) and not entry["minimized"]:
            entry["size"], entry["program_id"] = e["size"], e.get("id")

    def _tick(self, at: float) -> None:
        point = (round(at - self.started, 1), self.programs, sum(f["count"] for f in self.findings.values()),
                 len(self.findings))
        if self.timeline and self.timeline[-1][0] == point[0]:
            self.timeline[-1] = point
        else:
            self.timeline.append(point)

    # -- reading -----------------------------------------------------------------

    @classmethod
    def fold(cls, events: Iterable[dict]) -> Ledger:
        ledger = cls()
        for e in events:
            ledger.apply(e)
        return ledger

    @classmethod
    def of(cls, events: Iterable[dict]) -> Ledger:
        """One campaign's log folded, a last invocation with no stop event counted until its last event."""
        ledger = cls.fold(events)
        ledger.close_open()
        return ledger

    @classmethod
    def load(cls, out: Path) -> Ledger:
        return cls.of(read_events(out / LOG))

    def summary(self, now_active: float = 0.0) -> dict:
        seconds = self.active + now_active
        n = self.programs
        by_severity = Counter(f["severity"] for f in self.findings.values())
        return {
            **{k: self.config.get(k) for k in ("backend", "torch", "python", "seed", "shard", "workers", "oracles",
                                                "unavailable", "mode", "backend_unavailable", "backend_notes",
                                                "memory_mb", "allocation", "gpus")},
            "programs": n,
            "seconds": round(seconds, 1),
            "programs_per_second": round(n / seconds, 3) if seconds else 0.0,
            "deduplicated_share": round(self.deduplicated / n, 3) if n else 0.0,
            "seconds_per_program": {k: round(v / n, 3) for k, v in self.stage_seconds.items()} if n else {},
            "verdicts": dict(self.verdicts),
            "changed_calls": {"run": dict(self.changed), "recompiled": dict(self.recompiled),
                              "programs_with_3": self.with_3_changes},
            "findings_by_severity": dict(by_severity),
            "workers_lost": dict(self.lost),
            "errors": dict(self.errors),
            "harness_errors": dict(self.harness_errors.most_common(5)),
            "timeline": [dict(zip(("t", "programs", "failures", "distinct"), p)) for p in thin(self.timeline)],
            "generator": dict(self.features.most_common()),
            "semantic_coverage": {name: dict(c) for name, c in self.semantic.items()},
            "cudagraphs": dict(self.cudagraphs.most_common()),
            "door_coverage": {name: dict(c) for name, c in self.doors.items()},
            "masked": masked.summary(self.masked),
            "guard_kinds": guard_coverage.summary(self.guard_kinds, self.config.get("guard_kinds")),
            "feedback": feedback.summary(self.feedback),
            "coverage": {},
            "aborted": self.aborted,
            "root_causes": root_causes(list(self.findings.values())),
            # hits of findings: triaged in full, or recalled from an earlier hit's fingerprint (some of those
            # sampled and triaged in full anyway; mismatched: the full triage named another signature)
            "triage": dict(self.triage),
            "follow_ups": dict(self.follow_ups),
            "harness_seconds": _split(self, seconds),
            "findings": sorted(self.findings.values(), key=lambda f: (-f["count"], f["signature"])),
        }


def _split(self: Ledger, seconds: float) -> dict:
        """Workers' seconds by task type, each split into torch running
        programs (eager runs, compiles, compiled calls: harness.clock) and
        the harness around them; ``idle``: worker seconds no task held
        (scheduling, round trips, the campaign's own work)."""
        t = self.task_seconds
        out: dict = {}
        for kind in sorted({k.split(":")[0] for k in t}):
            total, torch_s, n = t[f"{kind}:total"], t[f"{kind}:torch"], t[f"{kind}:tasks"]
            out[kind] = {"tasks": n, "seconds": round(total, 1)}
            if kind not in CHILD_TASKS:  # a repro runs torch in a process of its own: not split
                out[kind].update(torch=round(torch_s, 1), harness=round(total - torch_s, 1), per_task={
                    "torch": round(torch_s / n, 3), "harness": round((total - torch_s) / n, 3)} if n else {})
        workers = self.config.get("workers") or 0
        if workers and seconds:
            out["idle"] = round(max(0.0, workers * seconds - sum(v["seconds"] for v in out.values())), 1)
        return out


def read_events(path: Path) -> list[dict]:
    """Every complete event; a line cut short by a killed campaign, or one
    still being written (no newline yet), is skipped."""
    if not path.exists():
        return []
    events = []
    text = path.read_text()
    for line in text[:text.rfind("\n") + 1].splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


class EventLog:
    """Appends events to the log and folds them into a live ledger."""

    def __init__(self, out: Path, ledger: Ledger):
        self.path, self.ledger = out / LOG, ledger

    def write(self, event: dict) -> dict:
        event = {"at": round(time.time(), 3), **event}
        with open(self.path, "a") as f:
            f.write(json.dumps(event, default=str) + "\n")
        self.ledger.apply(event)
        return event
