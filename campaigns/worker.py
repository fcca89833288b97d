"""What a campaign's worker process does with a task (``campaigns.pool``).

"run": run one program, judge it with the campaign's oracles, triage each
failure into a finding (with its repro, log and program). "minimize": shrink a
finding's program keeping its signature, localize it down the backend ladder,
write its repro and run it, standalone, to check it exits 1. Everything comes
back as plain values; only the campaign process writes files.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import time
import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Optional

import torch

from generators import differences
from generators.check import draws_random
from generators.doors import with_door
from generators.features import features
from generators.ir import Program, from_dict, to_dict
from generators.reduce import size
from generators.replays import default_plan
from harness import branches, clock, warm
from harness.doors import run_door
from harness.outcome import RunConfig
from harness.pipeline import InvalidProgram, rerun, run_program
from harness.replay import run_replay
from harness.run_edges import outcome_edges
from oracles import cudagraph, guards
from oracles.registry import DOOR_ORACLES, ORACLES, REPLAY_ORACLES, judge, judge_door, judge_replay
from oracles.registry import severity as oracle_severity
from reports import door_coverage, guard_coverage
from reports.door_triage import triage_door
from reports.known_issues import match
from reports.repro import driver_for, regions_expectation, render_repro
from reports.signature import normalize
from reports.triage import Finding, alike, known_issue, shared_reruns, spellings, triage, triage_replay
from reports import masked
from reports.unmask import unmasked_runs

from .localize import localize
from .sweep_task import run_batch
from .task_config import config_from, config_to, needing as _needing  # noqa: F401 (config_to: the campaign's too)
from .minimize import minimize, minimize_finding
from .worker_start import running_coverage, save_coverage


def init(options: dict) -> None:
    """Once per worker (after ``campaigns.worker_start`` began coverage): one
    intra-op thread, since workers are the parallelism; torch's expected
    warnings off."""
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="invoke_subgraph traced multiple backward graphs")
    if options.get("feedback"):  # the files were checked by the campaign (harness.branches.watched_files)
        branches.install(branches.Tracer(list(options["feedback"]), running_coverage()))


# Semantic edges this worker reported already (arcs: harness.branches.Tracer).
_REPORTED: set = set()


class ForkedAfterCuda(RuntimeError):
    """This worker cannot use CUDA: a harness error, never a finding of the compiler (harness.warm)."""


def handle(task: dict) -> dict:
    started, in_torch = time.perf_counter(), clock.torch_seconds()
    if torch.cuda._is_in_bad_fork():  # every program would fail so, CPU ones too (Dynamo asks the device)
        raise ForkedAfterCuda("this worker was forked from a process that had asked the CUDA driver something, "
                              "so it cannot use CUDA; workers must be spawned there (harness.warm.forked_context)")
    try:
        result = HANDLERS[task["type"]](task)
        if isinstance(result, dict):  # the task's seconds, and how many of them torch spent running programs
            result["task_seconds"] = {"total": round(time.perf_counter() - started, 3),
                                      "torch": round(clock.torch_seconds() - in_torch, 3)}
        return result
    finally:
        save_coverage()  # a worker killed later keeps what it covered so far


def _run(task: dict) -> dict:
    program = from_dict(task["program"])
    config = config_from(task["config"])
    oracles = tuple(task["oracles"])
    started, triaged = time.time(), _TRIAGE[0]
    result: dict = {"program": {"stages": {}, "deduplicated": False, "changed": [], "recompiled": [],
                                "verdicts": {}, "features": sorted(features(program))}, "findings": []}
    summary, verdicts = result["program"], []
    reached: set = set()  # the run's own feedback edges (harness.run_edges)
    door, program = program.options.door, with_door(program, "")  # the door is a run of its own (_door)
    branches.set_traced(bool(task.get("trace", True)))  # a steered campaign traces a share of programs' arcs
    if any(n in ORACLES for n in oracles):
        try:
            outcome = run_program(program, config)
        except InvalidProgram as e:
            return {"invalid": str(e), "restart": not process_healthy()}
        reached = outcome_edges(outcome)
        ran = guards.judged_runs(outcome)[0]
        summary.update(stages=outcome.seconds, deduplicated=bool(outcome.capture.deduplicated),
                       changed=[r.variant["kind"] for r in ran], recompiled=[r.variant["kind"] for r in ran if r.recompiled])
        summary["semantic"] = differences.coverage(program, summary["changed"])
        summary["guard_kinds"] = guard_coverage.kinds(outcome.capture.guards + outcome.capture.late_guards)
        recall = Recall(task.get("learned") or {}, task["id"])
        main = tuple(n for n in oracles if n in ORACLES)
        known = _judge(outcome, main, verdicts, result["findings"], recall=recall)

        def again(trigger: str, p: Program, c: RunConfig, names: tuple) -> list:
            summary.setdefault("unmasked", []).append(trigger)
            running(p, c)
            return _judge(rerun(outcome, p, _needing(c, names)), names, verdicts, result["findings"], trigger, recall,
                          tuple(known))

        stopped = _unmasked("main", program, config, known, main, summary, again)
        summary["known_crashes"] = sorted(set(stopped.values()))  # steering pays nothing for a known bug's doing
    if any(n in REPLAY_ORACLES for n in oracles) and draws_random(program):
        summary["cudagraphs"] = "not run: random ops (graph-safe RNG under CUDA graphs draws unlike eager)"
    elif any(n in REPLAY_ORACLES for n in oracles):
        replay = run_replay(program, default_plan(program), config.backend, device=task.get("device", "cuda"),
                            dedup=config.dedup, config=config.torch_config)
        summary["stages"] = {**summary["stages"], "replay": round(replay.seconds, 3)}
        judged = tuple(n for n in oracles if n in REPLAY_ORACLES)
        known = _judge_replay(replay, judged, config.dedup, verdicts, result["findings"], summary)

        def replayed(trigger: str, p: Program, c: RunConfig, names: tuple) -> list:
            run = run_replay(p, default_plan(p), c.backend, device=task.get("device", "cuda"), dedup=c.dedup,
                             config=c.torch_config)
            return _judge_replay(run, names, c.dedup, verdicts, result["findings"], {}, trigger)

        _unmasked("replay", program, config, known, judged, summary, replayed)
    if door and any(n in DOOR_ORACLES for n in oracles):
        _door(with_door(program, door), replace(config, backend=task.get("door_backend") or config.backend), oracles,
              verdicts, result, outcome if any(n in ORACLES for n in oracles) else None)
    # a backend's rejection of an op it does not know is counted apart from inconclusive runs
    summary["verdicts"] = dict(Counter("unsupported" if v.kind == "unsupported" else v.status.value for v in verdicts))
    if _TRIAGE[0] > triaged:
        summary["stages"] = {**summary["stages"], "triage": round(_TRIAGE[0] - triaged, 3)}
    summary["seconds"] = round(time.time() - started, 3)
    if task.get("feedback"):
        summary["edges"] = _edges(reached, summary, verdicts, result["findings"])
    crashed = any(v.failed and v.kind == "crash" for v in verdicts)
    result["restart"] = not process_healthy() or (crashed and not backend_healthy(config.backend))
    return result


def _edges(reached: set, summary: dict, verdicts: list, findings: list) -> list[str]:
    """The feedback edges of one run this worker has not reported before:
    arcs of the watched torch files, the run's own (harness.run_edges), and
    what the campaign judged: verdicts, call differences reached, the door's
    outcome, findings."""
    out = set(reached)
    out |= {f"verdict:{v.oracle}:{v.status.value}:{v.kind}" for v in verdicts}
    out |= {f"difference:{name}:{col}" for name, cols in (summary.get("semantic") or {}).items() for col in cols}
    if summary.get("door"):
        door = summary["door"]
        out.add(f"door:{door['name']}:{door['outcome']}:{bool(door.get('invoke_subgraph'))}")
    out |= {f"finding:{f['signature']}" for f in findings}
    out |= {f"unmasked:{t}" for t in summary.get("unmasked", [])}
    fresh = out - _REPORTED
    _REPORTED.update(fresh)
    return sorted(fresh | branches.take())


def _door(program: Program, config: RunConfig, oracles: tuple, verdicts: list, result: dict, plain=None) -> None:
    """The program through its door (harness.doors), judged by the door oracles
    (``plain``: the main run of the program without its door, for triage)."""
    t = time.perf_counter()
    running(program, config)
    run = run_door(program, config)  # a program the door cannot carry in eager is refused, not raised
    summary = result["program"]
    judged = judge_door(run, oracles)
    main = next((v for v in judged if v.oracle == "door"), None)
    outcome = "refused" if run.refused else (main.status.value if main is not None else "inconclusive")
    summary["door"] = door_coverage.event(run.door, outcome, run.invoke_subgraph, run.backend)
    stage = "door:inductor" if run.backend == "inductor" else "door"  # the inductor share, timed apart
    summary["stages"] = {**summary["stages"], stage: round(time.perf_counter() - t, 3)}
    names = tuple(n for n in oracles if n in DOOR_ORACLES)
    known = _judged_door(run, judged, verdicts, result["findings"], plain)

    def again(trigger: str, p: Program, c: RunConfig, names: tuple) -> list:
        running(p, c)
        rerun_ = run_door(p, c)
        return _judged_door(rerun_, judge_door(rerun_, names), verdicts, result["findings"], plain, trigger,
                            {"program": to_dict(p), "config": config_to(c)})

    # a known crash of the door run (the pass, a decorator) hides the door's own bugs: judged without its trigger
    _unmasked("door", program, config, known, names, summary, again)


def _unmasked(stage: str, program: Program, config: RunConfig, known: list, names: tuple, summary: dict,
              again) -> dict:
    """A stage judged again by ``again(trigger, program, config, oracles)`` (the known issues it met
    there) without each trigger of the known issues its first run met (reports.unmask), each timed as
    ``unmasked:[<stage>:]<trigger>``; its masked-share event in ``summary``. Returns what the first run
    alone left stopped: oracle -> known issue."""
    masks = _masks(known, names)
    stopped = dict(masks)
    for trigger, p, c, judged in unmasked_runs(program, config, known, names):
        t, triaged = time.perf_counter(), _TRIAGE[0]
        _unmask(masks, judged, again(trigger, p, c, judged))
        key = f"unmasked:{trigger}" if stage == "main" else f"unmasked:{stage}:{trigger}"
        summary["stages"][key] = round(time.perf_counter() - t - (_TRIAGE[0] - triaged), 3)
    summary.setdefault("masked", {})[stage] = masked.event({n: masks.get(n) for n in names}, stopped)
    return stopped


def _judged_door(run, judged: list, verdicts: list, findings: list, plain, unmasked: str = "",
                 where: dict | None = None) -> list:
    """A door run's verdicts triaged into ``findings`` (``unmasked``: the trigger
    the run is without, ``where``: its program and config); the known issues met."""
    known = []
    seen = {f["signature"] for f in findings}
    for verdict in judged:
        verdicts.append(verdict)
        if not verdict.failed:
            continue
        finding = triage_door(run, verdict, plain)
        issue = known_issue(finding)
        if issue is not None:
            known.append((issue, verdict.oracle, verdict.kind == "crash"))
        if finding.signature in seen:
            continue
        seen.add(finding.signature)
        described = {**_describe(finding, [], run.config.dedup), "minimizable": True}
        findings.append({**described, "unmasked": unmasked, "run": where} if unmasked else described)
    return known


def _judge_replay(replay, names: tuple, dedup: bool, verdicts: list, findings: list, summary: dict,
                  unmasked: str = "") -> list:
    """A replay's verdicts triaged into ``findings``; the known issues met."""
    known = []
    for verdict in judge_replay(replay, names):
        verdicts.append(verdict)
        if verdict.oracle == cudagraph.ENGAGED and not unmasked:  # engaged, or why not: counted per campaign
            summary["cudagraphs"] = f"{verdict.kind or 'engaged'}: {verdict.where}".rstrip(": ")
        if verdict.failed:
            finding = triage_replay(replay, verdict)
            issue = known_issue(finding)
            if issue is not None:
                known.append((issue, verdict.oracle, verdict.kind == "crash"))
            findings.append({**_describe(finding, [], dedup, replay=finding.extra), "minimizable": False,
                             **({"unmasked": unmasked} if unmasked else {})})
    return known


def _masks(known: list, names: tuple) -> dict:
    """oracle -> the known issue whose crash kept it from judging: every
    oracle of a run that died on one (its other oracles pass on nothing)."""
    crash = next((issue.id for issue, _, crashed in known if crashed), None)
    return dict.fromkeys(names, crash) if crash else {}


def _unmask(masks: dict, names: tuple, again: list) -> None:
    """The oracles a run without a trigger judged, unless a known crash stopped it too."""
    if not any(crashed for _, _, crashed in again):
        for name in names:
            if masks.get(name):
                masks[name] = None


# One re-hit in this many (by program and fingerprint) is triaged in full
# though its fingerprint is known, to keep checking that fingerprints decide.
SAMPLE_EVERY = 4


class Recall:
    """The fingerprints the campaign learned (-> signature; None: two hits
    with it were triaged apart, so it decides nothing) for one program's run."""

    def __init__(self, learned: dict, pid: str):
        self.learned, self.pid = learned, pid

    def sampled(self, verdict) -> bool:
        import zlib

        return zlib.crc32(f"{self.pid}|{verdict.oracle}|{verdict.kind}|{verdict.where}".encode()) % SAMPLE_EVERY == 0

    def triage(self, outcome, verdict) -> tuple[Finding, dict]:
        """The finding, and how its signature was reached: ``fingerprint``,
        ``recalled`` (taken from an earlier hit), ``sampled`` (a known
        fingerprint triaged in full anyway), ``expected`` (what the
        fingerprint said, where the full triage disagreed)."""
        sampled = self.sampled(verdict)
        finding = triage(outcome, verdict, None if sampled else self.learned)
        fp = finding.extra.get("fingerprint")
        if not fp:
            return finding, {}
        how = {"fingerprint": fp, "recalled": bool(finding.extra.get("recalled"))}
        if sampled and self.learned.get(fp):
            how["sampled"] = True
            if self.learned[fp] != finding.signature:
                how["expected"] = self.learned[fp]
        return finding, how


def _judge(outcome, oracles: tuple, verdicts: list, findings: list, unmasked: str = "",
           recall: Optional[Recall] = None, first: tuple = ()) -> list:
    """Judge one run, triage its failures into ``findings`` (each once per
    signature); return the known issues met: (issue, oracle, as a crash)
    (``first``: those the first run met, for a run without a trigger)."""
    crashes: list = []
    recall = recall or Recall({}, "")
    judged = judge(outcome, oracles)
    verdicts += judged
    failing = [v for v in judged if v.failed]
    t = time.perf_counter()
    with shared_reruns([ORACLES[v.oracle] for v in failing]):
        for verdict in failing:
            _triaged(outcome, verdict, recall, crashes, findings, unmasked, first)
    _TRIAGE[0] += time.perf_counter() - t
    return crashes


# Seconds this process spent triaging (re-runs that name a finding): a stage of its own in a program's
# summary, taken out of the stage it happened in (an unmasked run's own triage).
_TRIAGE = [0.0]


def _triaged(outcome, verdict, recall: Recall, crashes: list, findings: list, unmasked: str,
             crashes_before: tuple = ()) -> None:
    """One failure triaged into ``findings`` (once per signature); a known issue met goes to ``crashes``
    (``crashes_before``: the known issues the first run met, for a run without a trigger)."""
    finding, how = recall.triage(outcome, verdict)
    known = known_issue(finding)
    if known is not None:
        crashes.append((known, verdict.oracle, verdict.kind == "crash"))
    # A finding of the first run that a run without a crash's trigger shows again is kept in that run's
    # form: the first run's program meets the crash, and so would a repro rendered from it.
    earlier = next((k for k, f in enumerate(findings) if f["signature"] == finding.signature), None)
    behind_crash = earlier is not None and unmasked and not findings[earlier].get("unmasked") and \
        any(crashed for _, _, crashed in crashes_before)
    if earlier is None or behind_crash:
        described = {**_describe(finding, outcome.capture.graphs, _repro_dedup(outcome, verdict)), **how}
        # an unmasked run's program and config are not the task's: its minimization starts from them
        entry = ({**described, "unmasked": unmasked, "run": {"program": to_dict(finding.program),
                                                             "config": config_to(outcome.config)}}
                 if unmasked else described)
        if behind_crash:
            findings[earlier] = entry
        else:
            findings.append(entry)


def _repro_dedup(outcome, verdict) -> bool:
    """Whether the repro compiles with deduplication: the guard oracles judge
    the dedup-off run when the first compile with dedup crashed."""
    if ORACLES[verdict.oracle].variants and guards.judged_runs(outcome)[1] == "off":
        return False
    return outcome.config.dedup


# The oracles each strict repro driver re-makes: exactly (their crash's own
# message), or only crash versus wrong values ("*": any crash).
STRICT_ORACLES = {"differential": "differential", "guard": "guards", "dedup_guards": "guards", "unguarded": "guards",
                  "door": "door"}
CRASH_OR_VALUES = {"toggle": ("rewrite", "dedup_toggle"), "rewrite": ("rewrite",)}


def expected_crash(finding: Finding, check: str = "differential") -> str | None:
    """What the ``check`` repro of a finding must see to reproduce it: its
    crash (a glob matching just its normalized message), or wrong values
    (""); None (any failure) where the driver rebuilds less than the oracle ran."""
    v = finding.verdict
    if v.oracle in CRASH_OR_VALUES.get(check, ()):  # the toggle sees a crash in its own words
        return "*" if v.kind == "crash" else ""
    if STRICT_ORACLES.get(check) != v.oracle:
        return None
    if v.kind != "crash":
        return ""
    # the backend's name in a BackendCompilerFailed is the repro's own (a guard repro counts compiles through a
    # wrapper): named alike on both sides before normalize cuts the message to its length, so both cut alike
    named = normalize(re.sub(r"backend='[^']*'", "backend=*", v.message))
    return glob.escape(named).replace("backend=[*]", "backend=*")


def _describe(finding: Finding, graphs: list[str], dedup: bool, layer: str = "", replay: dict | None = None) -> dict:
    """A finding as the campaign stores it: the entry, and its folder's files
    (``dedup``: whether its repro compiles with deduplication; ``replay``: the
    plan and device of a CUDA-graph finding)."""
    dedup = dedup and finding.config.dedup
    severity = oracle_severity(finding.verdict.oracle)
    known = known_issue(finding)
    check, variant = driver_for(finding.verdict.details, severity, finding.verdict.oracle, finding.verdict.kind)
    if replay is not None:
        check, variant = "replay", None
    log = [str(finding.verdict), f"localization: {layer or '(not localized)'}", "",
           json.dumps(finding.verdict.details, indent=2, default=str), "",
           "# source", finding.source, "# Dynamo graphs after deduplication", *graphs]
    return {
        "signature": finding.signature, "oracle": finding.verdict.oracle, "kind": finding.verdict.kind,
        "severity": severity, "culprit": finding.culprit, "known_issue": known.id if known else None,
        "message": str(finding.verdict)[:500], "size": size(finding.program), "layer": layer,
        "driver": check, "variant": variant, "dedup": dedup, "differences": differences.names(finding.program),
        "spellings": spellings(finding.program),
        "files": {
            "program.json": json.dumps(to_dict(finding.program), indent=2),
            "repro.py": render_repro(finding.program, replace(finding.config, dedup=dedup), finding.signature, check,
                                     variant, replay=replay, expect_crash=expected_crash(finding, check),
                                     expect_difference=regions_expectation(finding.verdict.oracle,
                                                                           finding.verdict.details.get("label"))
                                     if check == "regions" else None),
            "log.txt": "\n".join(log),
        },
    }


def _minimize(task: dict) -> dict:
    """Shrink, localize, write and verify the repro of one distinct finding."""
    program = from_dict(task["program"])
    config = config_from(task["config"])
    deadline = time.time() + task["seconds"]
    if task["oracle"] in DOOR_ORACLES:
        return _minimize_door(task, program, replace(config, backend=task.get("door_backend") or config.backend),
                              deadline)
    oracle = ORACLES[task["oracle"]]
    outcome = run_program(program, replace(config, companions=oracle.needs))
    verdict = oracle(outcome)
    first = triage(outcome, verdict) if verdict.failed else None
    if first is None or first.signature != task["signature"]:
        return {"signature": task["signature"], "minimized": False, "note": "did not fail the same way again (flaky?)"}
    # minimized keeping the difference triage named, not the oracle's first one
    small = minimize_finding(program, outcome.config, task["oracle"], first.verdict, task["signature"], deadline)
    outcome = run_program(small.program, replace(config, companions=oracle.needs))
    verdict = oracle(outcome)
    finding = triage(outcome, verdict)
    if finding.signature != task["signature"]:  # cannot happen unless flaky: keep what was found
        return {"signature": task["signature"], "minimized": False, "note": "minimized program changed signature"}
    layer = localize(finding, upto=task.get("ladder_upto")).summary()
    described = _describe(finding, outcome.capture.graphs, _repro_dedup(outcome, verdict), layer)
    exit_code = verify_repro(described["files"]["repro.py"], task["repro_timeout"]) if task.get("repro_timeout") else None
    return {**described, "minimized": small.size_after < small.size_before, "size_before": small.size_before,
            "tries": small.tries, "repro_exit": exit_code, "restart": not process_healthy()}


def _minimize_door(task: dict, program: Program, config: RunConfig, deadline: float) -> dict:
    """A door finding: shrunk (the door itself may go: then the finding is
    not the door's and the signature changes, so the reducer keeps it) while
    the door run fails alike; kept if its signature survives triage."""
    oracle = DOOR_ORACLES[task["oracle"]]

    def judged(p: Program):
        run = run_door(p, config)
        return run, oracle(run)

    run, verdict = judged(program)
    if not verdict.failed or triage_door(run, verdict).signature != task["signature"]:
        return {"signature": task["signature"], "minimized": False, "note": "did not fail the same way again (flaky?)"}
    small = minimize(program, lambda p: alike(judged(p)[1], verdict), deadline)
    run, verdict = judged(small.program)
    finding = triage_door(run, verdict) if verdict.failed else None
    if finding is None or finding.signature != task["signature"]:  # the cheap predicate followed another bug
        small = replace(small, program=program, size_after=small.size_before)
        run, verdict = judged(program)
        finding = triage_door(run, verdict)
    described = _describe(finding, [], config.dedup)
    exit_code = verify_repro(described["files"]["repro.py"], task["repro_timeout"]) if task.get("repro_timeout") else None
    return {**described, "minimized": small.size_after < small.size_before, "size_before": small.size_before,
            "tries": small.tries, "repro_exit": exit_code, "restart": not process_healthy()}


def verify_repro(text: str, timeout: float, cwd: Optional[str] = None) -> Optional[int]:
    """Run a repro as a user would (its own process, forked warm: harness.warm); its exit status, None on timeout."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(text)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)}
        try:
            return warm.run([str(path)], timeout=timeout, env=env, cwd=cwd or os.getcwd()).returncode
        except subprocess.TimeoutExpired:
            return None


RUNNING = "--- run "  # a worker's log line: the program and config a task runs next besides its own


def running(program: Program, config: RunConfig) -> None:
    """Writes down, in this worker's log, a run of another program or config than its task's (a known crash's
    trigger taken away, a door): if the compiler takes the worker down there, that is the run to reproduce."""
    print(RUNNING + json.dumps({"program": to_dict(program), "config": config_to(config)}), flush=True)


def last_run(log_tail: str) -> Optional[tuple[Program, RunConfig]]:
    """The run a lost worker's log names last for its task (``running``); None: the task's own."""
    lines = [line for line in log_tail.split("--- task")[-1].splitlines() if line.startswith(RUNNING)]
    if not lines:
        return None
    d = json.loads(lines[-1][len(RUNNING):])
    return from_dict(d["program"]), config_from(d["config"])


def lost_finding(program: Program, config: RunConfig, kind: str, detail: str, log_tail: str,
                 timeout: float, memory_mb: float) -> dict:
    """A worker the compiler took down: a finding of its own kind, whose repro
    runs the compiled program in a child process and watches it (the run the
    worker's log names last, where it ran another than its task's)."""
    program, config = last_run(log_tail) or (program, config)
    where = _innermost_frame(log_tail)
    symptom = detail.split()[0] if kind == "signal" else kind
    signature = ":".join(p for p in ("worker", kind, symptom if symptom != kind else "", where) if p)
    known = match(signature)
    repro = render_repro(program, config, signature, "process", None,
                         {"kind": kind, "timeout": timeout, "memory_mb": memory_mb})
    return {
        "signature": signature, "oracle": "worker", "kind": kind, "severity": "process", "culprit": "",
        "known_issue": known.id if known else None, "message": f"worker lost: {kind}: {detail}",
        "size": size(program), "layer": "", "driver": "process", "variant": None,
        "files": {"program.json": json.dumps(to_dict(program), indent=2), "repro.py": repro,
                  "log.txt": f"worker lost: {kind}: {detail}\n\n# the worker's last log lines\n{log_tail}"},
    }


def _innermost_frame(log_tail: str) -> str:
    """``file.py:function`` of the innermost frame faulthandler printed for
    the lost task: what distinguishes one crash from another."""
    import re

    last = log_tail.split("--- task")[-1]
    current = last.split("Current thread")[-1]  # faulthandler prints other threads first
    frames = re.findall(r'File "([^"]+)", line \d+ in (\S+)', current)
    return f"{Path(frames[0][0]).name}:{frames[0][1]}" if frames else ""


def process_healthy() -> bool:
    """Whether plain eager tensor code still works in this process (seen
    broken: "PythonDispatcherTLS was not set" after a failed compile)."""
    try:
        torch.randn(1, 2).expand(3, 2).sum().item()
        return True
    except Exception:
        return False


def backend_healthy(spec: str) -> bool:
    """After a crash: whether the backend still compiles and runs a two-op
    probe in this process. A runtime the crash left broken (an IREE device
    whose semaphores a failed call left signalled) fails every later program,
    which would each be blamed for it: the worker is replaced instead."""
    from harness.backend_capabilities import runs_probe

    try:
        return runs_probe(spec)
    except Exception:
        return False


def _verify(task: dict) -> dict:
    return {"signature": task["signature"], "repro_exit": verify_repro(task["repro"], task["timeout"])}


HANDLERS = {"run": _run, "minimize": _minimize, "verify": _verify, "sweep": run_batch}
