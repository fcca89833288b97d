"""A fuzz campaign: draw programs, run them in worker processes, triage,
minimize and report.

This is the composition root ``python -m harness fuzz`` calls. The campaign
process draws programs and keeps the books; workers (``campaigns.pool``,
``campaigns.worker``) run, judge and minimize. Every result is appended to
``findings.jsonl`` as it arrives and each distinct finding's folder is
written at once, so a killed campaign loses nothing and ``--resume`` goes on
where it stopped.
"""

from __future__ import annotations

import json
import platform
import signal
import sys
import threading
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

from generators.ir import Program, from_dict, to_dict
from generators.strategies import programs
from generators.swarm import draw_swarm
from harness.branches import WATCHED, watched_files
from harness import torch_config
from generators.autograd import assign as assign_autograd
from generators.check import fitting_autograd
from generators.doors import DOORS, assign, in_share, with_door
from harness.capabilities import guard_kinds, has, unavailable
from harness.doors import available as door_names
from campaigns.pool import Lost, Pool
from harness.backend_capabilities import probe, probe_isolated, program_mode, remember, resolve_mode, unfit
from harness.backends import resolve
from oracles.registry import DOOR_ORACLES, ORACLES, REPLAY_ORACLES, run_config

from reports import coverage_report, feedback
from reports.known_issues import op_expected
from reports.ledger import LOG, EventLog, Ledger
from reports.schema import SEVERITIES
from .allocation import default_memory_mb, default_workers, read as read_allocation, worker_env
from .budget import plan
from .claims import HEARTBEAT, Claims, campaign_key
from .corpus import FOLDER as CORPUS, Corpus
from .folder import CAPABILITIES, prepare, slug, write_reports
from .op_sweep import MODES as SWEEP_MODES, Sweep, start as start_sweep
from .steer import Steering
from .upstream import EnvCapture, describe_finding
from .worker import config_from, config_to, lost_finding
from .worker_start import covered_paths, start_worker_server, worker_preload

# Programs drawn per Hypothesis seed. Past about ten examples Hypothesis's generate phase mutates the
# ones it has drawn: with 25, a quarter of a stream's programs were near copies of the one before (feature
# sets alike to 90%, seed-0 stream, 150 programs), each a full set of compiles that explores little; with
# 10, none was.
BATCH = 10
# --feedback: off; edges (count the edges the plain draw reaches, for an A/B); steer (campaigns.steer)
FEEDBACK = ("off", "edges", "steer")
PROGRAMS = "programs.jsonl"  # Options.keep_programs
# A door run on inductor before any has finished: about 15 s on a 2-core machine (one of a 40-program campaign
# with every oracle; the campaign's backend, aot_eager, takes about 0.5 s for the same run).
INDUCTOR_DOOR_SECONDS = 15.0
SAMPLE_KNOWN = 8  # one distinct known-issue finding in this many has its repro run (Campaign.follows_up)
@dataclass(frozen=True)
class Options:
    backend: str = "aot_eager"
    budget: float = 120.0
    seed: int = 0
    out: Path = Path("runs/latest")
    oracles: tuple[str, ...] = ()  # empty: all
    variants: Optional[int] = None
    workers: int = 0  # 0: as many as the CPUs and memory allotted allow (campaigns.allocation)
    shard: tuple[int, int] = (0, 1)  # (i, N): this campaign draws batches i, i+N, i+2N, ...
    # False: a fresh campaign; True: go on for another budget; "auto": start, or go on until the campaign's
    # budget and program count are spent in total (one command line for a first run and every requeue)
    resume: Union[bool, str] = False
    until: Optional[float] = None  # a wall-clock deadline (Unix time) next to the budget
    claims: Optional[Path] = None  # a folder shared by the shards: one follows up each root cause (campaigns.claims)
    config: tuple[str, ...] = ()  # torch config patches, "dynamo.KEY=VALUE"
    lint_share: float = 0.25  # share of programs run with graph_deduplication_lint
    coverage: bool = False
    timeout: float = 120.0  # per program
    memory_mb: float = 0.0  # per worker (0: the memory allotted, shared by the workers, 8192 at most)
    minimize_seconds: float = 30.0  # per distinct finding
    verify_repros: bool = True
    device: str = "cuda"  # where the replay oracles (cudagraph, cudagraph_engaged) run
    programs: int = 0  # stop once this many programs have run (0: the budget alone decides)
    # stop after this many of the shard's batches (BATCH programs drawn under one seed): work that does not
    # depend on time or machine, the same batches in any shard layout (N shards x k batches = one campaign's N*k)
    batches: int = 0
    stop_on_new: bool = False  # stop at the first finding no known issue names (bench: time to a planted fault)
    # signatures stop_on_new passes over: torch's own new findings, which a campaign without the fault made too
    stop_ignores: tuple[str, ...] = ()
    stop_on_op: str = ""  # stop at the first new finding of a swept case of this OpInfo op (bench: a planted op fault)
    # write every program as it is run (its autograd feature and door drawn) to PROGRAMS in the folder: the bench
    # times the bare compile loop on the campaign's own programs
    keep_programs: bool = False
    door_share: float = 0.25  # share of programs also run through a door (generators.doors), one door each
    # share of the drawn programs without an autograd feature given one (generators.autograd; the draw gives
    # them rarely, and at even odds at the edges)
    autograd_share: float = 0.0
    doors: tuple[str, ...] = ()  # the doors drawn from (empty: every door this torch has)
    # share of the workers' seconds that door runs compiled with inductor may take (the campaign's backend otherwise)
    inductor_share: float = 0.05
    feedback: str = "off"  # FEEDBACK: steer by torch's branches (campaigns.steer), or only count them
    watch: tuple[str, ...] = ()  # globs of torch files whose arcs are feedback (empty: harness.branches.WATCHED)
    corpus: tuple[Path, ...] = ()  # other campaigns' corpus folders (shards) mutants may start from
    trace_share: float = 0.5  # share of programs whose capture is traced for arcs (all give the harness's own edges)
    # train, inference (no_grad or inference_mode, drawn per program), one of those, or auto: by what the backend can do
    mode: str = "auto"
    # the OpInfo sweep before the search (campaigns.op_sweep): "on", "off", or "auto" (on for every backend but the
    # default aot_eager, whose op-level behaviour is eager's own)
    sweep: str = "auto"
    sweep_share: float = 0.25  # of the budget, at most: the sweep's batches go out in the first part of it
    sweep_ops: tuple[str, ...] = ()  # sweep these OpInfo ops alone (and sweep whatever the backend)
    # with the sweep on: share of the search's worker seconds given to OpInfo batches (steered). A backend's bugs
    # are mostly op-level, and the search's own programs draw from the hand catalogue: at 0.5 a 120-s campaign
    # reached 860 to 1,270 cells of about 8,000, at 0.75 about 1,550 (the later planted op faults found, not before)
    op_share: float = 0.75


def check_options(o: Options) -> tuple[tuple[str, ...], tuple]:
    """Everything wrong with the options, as one error before anything runs."""
    names = o.oracles or (*ORACLES, *DOOR_ORACLES)
    known = (*ORACLES, *REPLAY_ORACLES, *DOOR_ORACLES)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown oracle(s) {', '.join(unknown)}: use {', '.join(known)}")
    if any(n in REPLAY_ORACLES for n in names):
        import torch

        if o.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"oracles {', '.join(n for n in names if n in REPLAY_ORACLES)} replay CUDA graphs on "
                             f"{o.device}, but torch.cuda.is_available() is False here; --device cpu runs them on "
                             f"CPU (real backends then skip CUDA graphs and say so)")
    i, n = o.shard
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard {i}/{n}: expected i/N with 0 <= i < N")
    if o.budget <= 0 or o.timeout <= 0 or o.memory_mb < 0 or o.workers < 0:
        raise ValueError("budget, timeout, memory limit and workers must be positive (0 workers or memory: sized "
                         "to the allocation)")
    if o.programs < 0 or o.batches < 0:
        raise ValueError(f"programs {o.programs}, batches {o.batches}: expected counts (0: no limit)")
    if o.batches and o.feedback == "steer":
        raise ValueError("--batches counts drawn batches; a steered campaign (--feedback steer) draws mutants too")
    unknown = [d for d in o.doors if d not in DOORS]
    if unknown:
        raise ValueError(f"unknown door(s) {', '.join(unknown)}: use {', '.join(DOORS)}")
    for what, share in (("lint", o.lint_share), ("door", o.door_share), ("inductor", o.inductor_share),
                        ("trace", o.trace_share), ("autograd", o.autograd_share), ("sweep", o.sweep_share),
                        ("op", o.op_share)):
        if not 0 <= share <= 1:
            raise ValueError(f"{what} share {share}: expected a fraction between 0 and 1")
    if o.sweep not in SWEEP_MODES:
        raise ValueError(f"sweep {o.sweep!r}: use one of {', '.join(SWEEP_MODES)}")
    if o.feedback not in FEEDBACK:
        raise ValueError(f"feedback {o.feedback!r}: use one of {', '.join(FEEDBACK)}")
    if o.feedback != "off":
        watched_files(o.watch or WATCHED)  # a pattern naming nothing in this torch is an error
    elif o.watch or o.corpus:
        raise ValueError("--watch and --corpus need --feedback steer (or edges)")
    missing = [str(c) for c in o.corpus if not c.is_dir()]
    if missing:
        raise ValueError(f"--corpus: no such folder: {', '.join(missing)}")
    if o.sweep_ops:
        from harness.opinfo_db import check_names

        check_names(o.sweep_ops)
    patch = torch_config.parse(o.config)
    resolve(o.backend)  # a bad name is one line before anything starts
    return names, patch


def probe_backend(o: Options) -> None:
    """What the backend can do, asked in a child process (it may abort or
    hang), with the deadline of a confirmed hang of one program; a resumed
    campaign goes on with what its first run learned. Slow: after every
    other check."""
    remember(o.backend, o.out / CAPABILITIES if o.resume else None)
    probe_isolated(o.backend, timeout=min(300.0, max(20.0, 3 * o.timeout)))
    resolve_mode(o.backend, o.mode)


def _batch(seed: int, batch: int, strategy, offset: int) -> list[Program]:
    drawn: list[Program] = []

    def keep(program: Program) -> None:
        drawn.append(program)

    test = settings(max_examples=BATCH, database=None, deadline=None, phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck))(given(strategy(batch))(keep))
    hyp_seed(seed * 100_003 + batch + offset)(test)()
    return drawn


def _batches(seed: int, shard: tuple[int, int], skip: set, label: str, strategy, offset: int = 0) -> Iterator:
    """(id, program, batch) in a fixed order for (seed, shard): batch b of
    BATCH programs is ``strategy(b)`` drawn under Hypothesis seed
    ``seed * 100003 + b + offset``; ids ``<seed>-<label><b>-<k>``; a program
    drawn before in this stream, or an id in ``skip``, is left out."""
    i, n = shard
    batch = i
    # Hypothesis begins every batch with the same simplest programs, whatever the seed: the first batch's,
    # which is shard 0's. Other shards leave them to it, so no two shards of one seed run one program.
    seen: set[str] = {p.to_json() for p in _batch(seed, 0, strategy, offset)} if i else set()
    while True:
        drawn = _batch(seed, batch, strategy, offset)
        for k, program in enumerate(drawn):
            pid, key = f"{seed}-{label}{batch}-{k}", program.to_json()
            if key not in seen and pid not in skip:
                seen.add(key)
                yield pid, program, batch
        batch += n


def stream_batch(pid: str, shard: tuple[int, int]) -> int:
    """Which of its shard's batches a drawn program (id ``<seed>-<batch>-<k>``) came from: 0, 1, ..."""
    return (int(pid.split("-")[1]) - shard[0]) // shard[1]


def draw(seed: int, shard: tuple[int, int], skip: set) -> Iterator[tuple[str, Program]]:
    """Programs in a fixed order for (seed, shard): batch b of BATCH programs
    is drawn under Hypothesis seed ``seed * 100003 + b``; every other batch
    focuses on the edge kinds (``programs(edges=True)``), which the plain
    draw reaches only rarely."""
    for pid, program, _ in _batches(seed, shard, skip, "", lambda b: programs(edges=b % 2 == 1)):
        yield pid, program


def swarm_draw(seed: int, shard: tuple[int, int], skip: set) -> Iterator[tuple[str, Program, dict]]:
    """Swarm batches (generators.swarm) in a fixed order for (seed, shard):
    batch b is drawn under one feature configuration, itself drawn from
    (seed, b); ids ``<seed>-w<b>-<k>``."""
    import random

    def config(batch: int):
        return draw_swarm(random.Random(seed * 100_003 + batch))

    for pid, program, batch in _batches(seed, shard, skip, "w", lambda b: programs(swarm=config(b)), 50_000_017):
        yield pid, program, config(batch).to_dict()


def _logged_origin(origin: dict) -> dict:
    """How a program came about, as the log records it: a swarm draw's
    configuration as the features it switched off and on."""
    out = {k: v for k, v in origin.items() if k != "swarm"}
    if "swarm" in origin:
        out.update(swarm_off=origin["swarm"]["off"], swarm_on=origin["swarm"]["on"])
    return out


def _lint(pid: str, share: float) -> bool:
    """Whether this program runs under the pass's own lint (a fixed share, by id)."""
    return share > 0 and (sum(map(ord, pid)) % 100) < share * 100


@dataclass
class Campaign:
    options: Options
    oracles: tuple[str, ...]
    config: dict  # RunConfig as a dict
    log: EventLog
    pool: Optional[Pool] = None
    started: float = field(default_factory=time.time)
    programs: dict = field(default_factory=dict)  # id -> program dict, while in flight or minimizing
    minimizing: set = field(default_factory=set)
    backlog: list = field(default_factory=list)  # minimize tasks not yet started
    verifying: set = field(default_factory=set)  # signatures whose repro.py a worker is running
    # fingerprint -> signature its hits were triaged to (None: triaged apart;
    # see reports.triage.fingerprint); sent with every run task
    learned: dict = field(default_factory=dict)
    steering: Optional[Steering] = None  # --feedback
    skipped_logged: set = field(default_factory=set)  # corpus entries whose skip was logged
    unfit: Counter = field(default_factory=Counter)  # programs not run: why they test nothing of the backend
    claims: Optional[Claims] = None  # shared with the other shards: who follows up which root cause
    deferred: dict = field(default_factory=dict)  # signature -> follow-up job another shard claimed (or unfinished)
    pending: dict = field(default_factory=dict)  # signature -> the parts of its follow-up still running
    failed: set = field(default_factory=set)  # signatures this shard's minimization failed on
    sweep: Optional[Sweep] = None  # the OpInfo sweep (campaigns.op_sweep), once its cases are loaded
    sweep_singles: list = field(default_factory=list)  # one failing case each, to run as ordinary programs
    sweep_sent: int = 0
    sweep_inflight: int = 0  # batches out with the workers
    found_ops: set = field(default_factory=set)  # OpInfo ops whose swept case alone made a new finding
    search_seconds: Counter = field(default_factory=Counter)  # worker seconds of the search's tasks: "op" batches, "other"
    inductor_seconds: float = 0.0  # worker seconds of door runs on inductor (their reruns without a trigger included)
    inductor_doors: int = 0  # such door runs finished
    inductor_out: int = 0  # and with the workers

    def __post_init__(self) -> None:
        for e in self.ledger.fingerprints:
            self._learn(e)
        self.deferred.update(self.ledger.open_follow_ups)  # resumed: follow-ups a killed run left open

    @property
    def ledger(self) -> Ledger:
        return self.log.ledger

    @property
    def out(self) -> Path:
        return self.options.out

    # -- results -----------------------------------------------------------------

    def timeout(self, task: dict) -> float:
        return {"verify": 90.0, "minimize": self.options.minimize_seconds + 300}.get(
            task["type"], self.options.timeout * (3 if task.get("retry") else 1))

    def on_result(self, task: dict, result) -> None:
        if isinstance(result, dict) and "task_seconds" in result:
            self.log.write({"event": "task", "type": task["type"], **result["task_seconds"]})
            if task.get("search") is not None:
                self.search_seconds[task["search"]] += result["task_seconds"]["total"]
        if isinstance(result, Lost) and result.kind == "stopped":  # signalled from outside: run it again
            self.log.write({"event": "worker_stopped", "id": task["id"], "detail": result.detail})
            self.pool.submit(task, timeout=self.timeout(task), first=True)
            return
        if task["type"] == "verify":
            self.verifying.discard(task["signature"])
            self._part_done(task["signature"], "verify")
            entry = self.ledger.findings.get(task["signature"])
            if isinstance(result, dict) and entry is not None and not entry["minimized"]:  # a minimized repro was run by its minimizer
                self.log.write({"event": "minimized", "signature": result["signature"], "repro_exit": result["repro_exit"]})
                self._write_meta(entry, task)
            return
        if task["type"] == "sweep":
            self._swept(task, result)
            return
        if task["type"] == "minimize":
            self.minimizing.discard(task["signature"])
            self._part_done(task["signature"], "minimize", ok=self._minimized(task, result))
            return
        pid = task["id"]
        if isinstance(result, Lost) and result.kind == "hang" and not task.get("retry"):
            # Slow is not hung: a loaded machine or a big inductor build can pass
            # the deadline. Only a second timeout, three times longer, in a
            # fresh worker, is a finding.
            self.log.write({"event": "hang_retry", "id": pid, "detail": result.detail})
            self.pool.submit({**task, "retry": True}, timeout=self.timeout({**task, "retry": True}), first=True)
            return
        program = self.programs.pop(pid, task["program"])
        if task.get("door_backend") == "inductor":
            self.inductor_out -= 1
            if isinstance(result, dict) and "program" in result:
                self.inductor_doors += 1
                self.inductor_seconds += sum(v for k, v in result["program"].get("stages", {}).items()
                                             if k.startswith(("door", "unmasked:door")))
        found: list = []  # the findings a swept case's ordinary run made
        if isinstance(result, Lost):
            config = config_from(task["config"])
            finding = lost_finding(from_dict(program), config, result.kind, result.detail, result.log_tail,
                                   self.options.timeout, self.pool.memory_mb)
            self.log.write({"event": "lost", "id": pid, "kind": result.kind, "detail": result.detail})
            self._finding(pid, finding, program, task)
            found = [{**finding, "known_issue": self.ledger.findings[finding["signature"]]["known_issue"]}]
        elif isinstance(result, tuple):  # ("error", traceback): a harness bug, kept apart
            self.log.write({"event": "harness_error", "id": pid, "traceback": result[1][-4000:]})
        elif "invalid" in result:
            self._steer(task, program, [], 0.5)
            self.log.write({"event": "invalid_program", "id": pid, "error": result["invalid"], "program": program})
        else:
            reached = result["program"].pop("edges", [])
            steered = self._steer(task, program, reached, result["program"].get("seconds", 0.0),
                                  bool(result["program"].get("deduplicated")), bool(result["program"].get("known_crashes")))
            self.log.write({"event": "program", "id": pid, **result["program"], **steered})
            for finding in result["findings"]:
                self._finding(pid, finding, program, task)
            found = result["findings"]
        if task.get("sweep_cell") and self.sweep is not None:
            self.sweep.single_judged(program, found)
            if any(not f.get("known_issue") for f in found):
                self.found_ops |= {m["op"] for m in program["meta"]["opinfo"]}

    def _swept(self, task: dict, result) -> None:
        """A sweep batch judged: its cells' statuses, and the cases to run alone next."""
        if not isinstance(result, dict):  # the worker died or hung on the batch, or the harness raised
            detail = result.detail if isinstance(result, Lost) else result[1][-500:]
            result = {"runs": [{"label": "main", "status": "fail", "kind": "lost", "message": detail}]}
        self.sweep_inflight -= 1
        follow = self.sweep.judged(task["program"], result)
        self.sweep_singles += [f["single"] for f in follow]
        runs = result.get("runs", [])
        self.log.write({"event": "sweep_batch", "id": task["id"], "cases": len(task["program"]["meta"]["opinfo"]),
                        "runs": [{k: r.get(k) for k in ("label", "status", "kind", "masked")} for r in runs],
                        "seconds": result.get("seconds", 0.0)})

    def sweep_task(self, config: dict, sweeping: bool, search_seed: int | None = None) -> dict | None:
        """The sweep's next task: a failing case alone, a half of a failing batch, then (``sweeping``) the
        next batch, or (``search_seed``) a steered batch for the search."""
        if self.sweep is None:
            return None
        self.sweep_sent += 1
        if self.sweep_singles:
            program = self.sweep_singles.pop(0)
            pid = f"sweep-c{self.sweep_sent}"
            self.programs[pid] = program
            self.log.write({"event": "sweep_single", "id": pid, "cells": sorted({
                "|".join((m["op"], m["kind"], m["dtype"])) for m in program["meta"]["opinfo"]})})
            return {"type": "run", "id": pid, "program": program, "config": config, "oracles": list(self.oracles),
                    "device": self.options.device, "learned": dict(self.learned), "sweep_cell": True}
        picked = self.sweep.pending.pop() if self.sweep.pending else self.sweep.next_batch() if sweeping \
            else self.sweep.search_batch(search_seed) if search_seed is not None else None
        if picked is None:
            self.sweep_sent -= 1
            return None
        cases, region = picked
        self.sweep_inflight += 1
        return {"type": "sweep", "id": f"sweep-b{self.sweep_sent}", "program": self.sweep.program(cases, region),
                "config": self.sweep.batch_config(cases, config), **({"search": "op"} if search_seed is not None else {})}

    def inductor_due(self, share: float, now: float) -> bool:
        """Whether the next door run may compile with inductor: the door runs on inductor, those finished, those
        out and this one (each at the mean so far, INDUCTOR_DOOR_SECONDS before the first), within ``share`` of
        the workers' seconds since the start. An inductor compile takes seconds where the campaign's backend takes
        a fraction of one: a share of door runs gave it, by chance, most of a short campaign's time or none."""
        each = self.inductor_seconds / self.inductor_doors if self.inductor_doors else INDUCTOR_DOOR_SECONDS
        workers = len(self.pool.workers) if self.pool is not None else max(1, self.options.workers)
        return share > 0 and self.inductor_seconds + each * (self.inductor_out + 1) <= \
            share * (now - self.started) * workers

    def op_due(self, share: float) -> bool:
        """Whether the search's OpInfo batches have had less than ``share`` of its worker seconds so far."""
        spent = self.search_seconds["op"] + self.search_seconds["other"]
        return self.sweep is not None and self.search_seconds["op"] <= share * spent

    def _steer(self, task: dict, program: dict, reached: list, seconds: float, deduplicated: bool = False,
               known_crash: bool = False) -> dict:
        """Feedback from one program (campaigns.steer): what its event records."""
        if self.steering is None or "origin" not in task:
            return {}
        new = self.steering.observe(task["id"], from_dict(program), task["origin"], reached, seconds, deduplicated,
                                    known_crash)
        return {"origin": _logged_origin(task["origin"]), "new_edges": len(new),
                "new_by_file": dict(Counter(feedback.edge_file(e) for e in new))}

    def _learn(self, finding: dict) -> None:
        fp, sig = finding.get("fingerprint"), finding["signature"]
        if not fp or finding.get("recalled"):
            return
        if "expected" in finding or self.learned.get(fp, sig) != sig:
            self.learned[fp] = None  # one fingerprint, two signatures: it decides nothing
        else:
            self.learned[fp] = sig

    def follows_up(self, entry: dict) -> bool:
        """Whether a distinct finding's repro is run: every new root cause's;
        one recorded root cause's (a known issue) in SAMPLE_KNOWN, by
        signature, counted in the summary (``follow_ups``). Only new root
        causes are minimized and localized: the baseline holds a known
        issue's minimal repro."""
        import zlib

        return not entry["known_issue"] or zlib.crc32(entry["signature"].encode()) % SAMPLE_KNOWN == 0

    def _finding(self, pid: str, finding: dict, program: dict, task: dict) -> None:
        self._learn(finding)
        sig = finding["signature"]
        entry = self.ledger.findings.get(sig)
        folder = entry["folder"] if entry else f"findings/{slug(sig)}"
        smaller = entry is None or (not entry["minimized"] and finding["size"] < (entry["size"] or 1 << 30))
        event = {k: v for k, v in finding.items() if k not in ("files", "run")}
        if task.get("origin", {}).get("source") not in (None, "draw"):  # how the program came about
            event["origin"] = _logged_origin(task["origin"])
        self.log.write({"event": "finding", "id": pid, "folder": folder, **event})
        entry = self.ledger.findings[sig]
        if smaller:
            self._write_folder(entry, finding["files"], task)
        else:
            self._write_meta(entry, task)
        if entry["count"] != 1:
            return
        if not self.follows_up(entry):
            self.log.write({"event": "follow_up", "signature": sig, "skipped": f"known issue {entry['known_issue']}"})
            return
        run = finding.get("run") or {"program": program, "config": task["config"]}  # an unmasked run's own
        job = {"program": run["program"], "config": run["config"], "door_backend": task.get("door_backend", ""),
               "verify": self.options.verify_repros and finding["kind"] != "hang",
               "minimize": finding.get("minimizable", True) and self.options.minimize_seconds > 0
               and not entry["known_issue"]}
        if not (job["verify"] or job["minimize"]):
            self.log.write({"event": "follow_up", "signature": sig, "skipped": "", "known_issue": entry["known_issue"]})
            return
        if self.claims is not None:
            mine, who = self.claims.take(sig)
            if not mine:  # another shard follows it up; this one counts its hits
                self.deferred[sig] = job
                self.log.write({"event": "follow_up", "signature": sig, "skipped": who, "claimed": True,
                                "known_issue": entry["known_issue"], "job": job})
                return
        self._follow_up(entry, job)

    def _follow_up(self, entry: dict, job: dict, note: str = "") -> None:
        """Run the repro at once (a minimization may never come) and backlog the minimization."""
        sig = entry["signature"]
        self.log.write({"event": "follow_up", "signature": sig, "skipped": "", "known_issue": entry["known_issue"],
                        "job": job, **({"taken_over": note} if note else {})})
        parts = self.pending[sig] = set()
        repro = self.out / entry["folder"] / "repro.py"
        if job["verify"] and repro.exists():
            parts.add("verify")
            self._verify(entry, repro.read_text())
        if job["minimize"]:
            parts.add("minimize")
            self._queue_minimize(entry, job)
        if not parts:
            self._part_done(sig, "")

    def _part_done(self, sig: str, part: str, ok: bool = True) -> None:
        """A minimization that failed from this shard's program gives the
        claim up: another shard that met the root cause tries from its own."""
        parts = self.pending.get(sig)
        if parts is None:
            return
        parts.discard(part)
        if not ok:
            self.failed.add(sig)
        if not parts:
            del self.pending[sig]
            if self.claims is not None:
                self.claims.release(sig) if sig in self.failed else self.claims.done(sig)

    def tick_claims(self, force: bool = False) -> None:
        """Keep this shard's claims fresh; take over the deferred follow-ups
        whose claim went stale or was given up (their shard is gone); without
        claims (one shard, resumed), start the follow-ups left open at once."""
        if self.claims is None:
            for sig, job in list(self.deferred.items()):
                del self.deferred[sig]
                if sig in self.ledger.findings:
                    self._follow_up(self.ledger.findings[sig], job, "an earlier run of this campaign")
            return
        if not force and time.time() - self.claims.last_beat < HEARTBEAT:
            return
        self.claims.heartbeat()
        for sig, job in list(self.deferred.items()):
            if sig not in self.ledger.findings or (self.claims.read(sig) or {}).get("state") == "done":
                del self.deferred[sig]
                continue
            mine, who = self.claims.take(sig)
            if mine:
                del self.deferred[sig]
                self._follow_up(self.ledger.findings[sig], job, who or "an earlier run of this shard")

    def _queue_minimize(self, entry: dict, job: dict) -> None:
        """Backlog a minimization: new findings before known issues."""
        task = {"type": "minimize", "id": f"min:{entry['signature']}", "signature": entry["signature"],
                "oracle": entry["oracle"], "program": job["program"], "config": job["config"],
                **({"door_backend": job["door_backend"]} if job.get("door_backend") else {}),
                "seconds": self.options.minimize_seconds, "ladder_upto": self.options.backend,
                "repro_timeout": 120 if self.options.verify_repros else 0}
        self.backlog.insert(len(self.backlog) if entry["known_issue"] else 0, task)

    def start_minimizing(self, deadline: float) -> None:
        """At most half the workers minimize (one at least), so fuzzing goes on;
        none starts without the time to finish."""
        cap = max(1, len(self.pool.workers) // 2)
        while self.backlog and len(self.minimizing) < cap and deadline - time.time() > self.options.minimize_seconds + 20:
            job = self.backlog.pop(0)
            self.minimizing.add(job["signature"])
            self.pool.submit(job, timeout=self.timeout(job), first=True)

    def _minimized(self, task: dict, result) -> bool:
        """Whether the minimization came back with its files."""
        entry = self.ledger.findings.get(task["signature"])
        if entry is None or not isinstance(result, dict) or "files" not in result:
            note = (result.get("note") if isinstance(result, dict) else
                    f"worker lost: {result.kind}" if isinstance(result, Lost) else f"harness error: {result[1][-1500:]}")
            self.log.write({"event": "minimize_failed", "signature": task["signature"], "note": str(note)[:2000]})
            return False
        self.log.write({"event": "minimized", "signature": task["signature"], "minimized": result["minimized"],
                        "size": result["size"], "size_before": result["size_before"], "tries": result["tries"],
                        "layer": result["layer"], "repro_exit": result["repro_exit"],
                        "differences": result.get("differences", []), "spellings": result.get("spellings", [])})
        self._write_folder(entry, result["files"], task)
        return True

    def _write_folder(self, entry: dict, files: dict, task: dict) -> None:
        folder = self.out / entry["folder"]
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
        self._write_meta(entry, task)
        describe_finding(folder, self.out)  # issue.md and its regression test (campaigns.upstream)

    def verify_rest(self) -> int:
        """Run every repro.py not run yet, new findings first; how many."""
        before = len(self.verifying)
        # each goes to the front of the queue (before programs waiting there): the last submitted runs first
        for entry in sorted(self.ledger.findings.values(), key=lambda f: (f["known_issue"] is not None, -f["count"]),
                            reverse=True):
            repro = self.out / entry["folder"] / "repro.py"
            if entry["repro_exit"] is None and entry["signature"] not in self.minimizing | self.verifying \
                    and entry["signature"] not in self.deferred \
                    and entry["kind"] != "hang" and repro.exists() and self.follows_up(entry):
                self._verify(entry, repro.read_text())
        return len(self.verifying) - before

    def _verify(self, entry: dict, repro: str) -> None:
        self.verifying.add(entry["signature"])
        self.pool.submit({"type": "verify", "id": f"verify:{entry['signature']}", "signature": entry["signature"],
                          "repro": repro, "timeout": 60, "config": self.config}, timeout=90, first=True)

    def _write_meta(self, entry: dict, task: dict) -> None:
        meta = {**entry, "backend": self.options.backend, "torch": self.ledger.config.get("torch"),
                "config": {"use_graph_deduplication": entry.get("dedup", self.config["dedup"]),
                           "torch_config": task["config"]["torch_config"]},
                "seed": self.options.seed, "program_id": entry.get("program_id")}
        (self.out / entry["folder"] / "meta.json").write_text(json.dumps(meta, indent=2, default=str))

    # -- reports -----------------------------------------------------------------

    def summary(self) -> dict:
        s = self.ledger.summary(time.time() - self.started)
        if self.unfit:
            s["unfit"] = dict(self.unfit)
        return s

    def log_skipped(self) -> None:
        """Corpus entries not loaded (another torch or backend, corrupt): one
        event each, and one warning line per reason."""
        if self.steering is None:
            return
        logged = self.skipped_logged
        fresh = {path: why for path, why in self.steering.corpus.skipped.items() if path not in logged}
        for path, why in fresh.items():
            self.log.write({"event": "corpus_skipped", "path": path, "reason": why})
        logged |= set(fresh)
        for why, n in Counter(fresh.values()).items():
            print(f"warning: skipped {n} corpus entr{'y' if n == 1 else 'ies'}: {why}", file=sys.stderr)

    def write_reports(self, final: bool = False) -> dict:
        s = self.summary()
        if self.steering is not None and s.get("feedback"):
            s["feedback"].update(corpus=len(self.steering.corpus.entries), edges_known=len(self.steering.edges),
                                 arms=self.steering.arms_summary(),
                                 corpus_skipped=len(self.steering.corpus.skipped))
        if final and self.options.coverage:
            s["coverage"] = coverage_report.combine(self.out / "coverage", covered_paths())
        if self.sweep is not None:
            self.sweep.save()
            s["op_coverage"] = {self.options.backend: self.sweep.table()}
        write_reports(self.out, s)
        return s


# -- the campaign loop ------------------------------------------------------------------


def run(options: Options, progress: Optional[Callable[[str, bool], None]] = None) -> dict:
    import torch

    seconds, done_before = plan(options.out, options.budget, options.programs, options.resume, options.until)
    out = options.out
    resume = options.resume == "auto" and (out / LOG).exists() or options.resume is True
    if resume:
        previous = json.loads((out / "campaign.json").read_text()) if (out / "campaign.json").exists() else {}
        if previous and (previous.get("backend"), previous.get("seed"), tuple(previous.get("shard") or (0, 1))) \
                != (options.backend, options.seed, tuple(options.shard)):
            raise ValueError(f"--resume: {out} holds a campaign of backend {previous.get('backend')} seed "
                             f"{previous.get('seed')} shard {'/'.join(map(str, previous.get('shard') or (0, 1)))}; "
                             f"resume it with the same --backend, --seed and --shard")
    oracles, patch = check_options(replace(options, resume=resume))
    start_worker_server(options.coverage)  # it imports torch while the backend is probed
    probe_backend(replace(options, resume=resume))
    ledger = prepare(out, resume)
    allocation = read_allocation()
    workers = options.workers or default_workers(allocation)
    memory_mb = options.memory_mb or default_memory_mb(allocation, workers)
    caps = probe(options.backend)
    # --batches: work that does not depend on time or machine, which a time-boxed sweep would
    loading = start_sweep("off" if options.batches and options.sweep == "auto" else options.sweep, options.backend,
                          options.sweep_ops)  # the OpInfo cases load while the pool starts
    mode = resolve_mode(options.backend, options.mode)
    config = config_to(replace(run_config(options.backend, oracles, variants=options.variants, mode=mode),
                               torch_config=patch))
    started = time.time()
    deadline = min(started + seconds, float("inf") if options.until is None else options.until)
    sweep_until = started + options.sweep_share * (deadline - started)
    log = EventLog(out, ledger)
    (out / "campaign.json").write_text(json.dumps({**options.__dict__, "out": str(out), "workers": workers,
                                                   "memory_mb": memory_mb}, indent=2, default=str))
    (out / CAPABILITIES).write_text(json.dumps(asdict(caps), indent=2))
    env = EnvCapture(out)  # collect_env.txt, once per campaign, in the background
    log.write({"event": "start", "config": {
        "backend": options.backend, "torch": torch.__version__, "python": platform.python_version(),
        "seed": options.seed, "shard": f"{options.shard[0]}/{options.shard[1]}", "workers": workers,
        "memory_mb": memory_mb, "allocation": allocation.sources, "gpus": list(allocation.gpus),
        "oracles": list(oracles), "run_config": config, "coverage": options.coverage,
        "unavailable": unavailable(), "mode": mode, "backend_unavailable": caps.lost(), "backend_notes": caps.notes(),
        "guard_kinds": list(guard_kinds())}})
    doors = tuple(d for d in door_names() if (not options.doors or d in options.doors) and (mode == "train" or not
                                                                                        DOORS[d].gradients)) \
        if any(n in DOOR_ORACLES for n in oracles) else ()
    campaign = Campaign(options, oracles, config, log, started=started)
    if options.claims is not None:
        campaign.claims = Claims(options.claims, campaign_key(options.backend, options.seed, torch.__version__, mode),
                                 f"{options.shard[0]}/{options.shard[1]}", out)
    coverage_file = None
    if options.coverage:
        (out / "coverage").mkdir(exist_ok=True)
        coverage_file = str((out / "coverage" / ".coverage").resolve())
    source = draw(options.seed, options.shard, set(ledger.done))
    watched = None
    if options.feedback != "off":
        watched = watched_files(options.watch or WATCHED)
        campaign.steering = steering(options, ledger, source, torch.__version__)
        campaign.log_skipped()
    # coverage starts before the worker module imports torch: then each worker is spawned and imports it
    # itself; otherwise they are forked from a server that imported it once (a lost worker's successor is
    # ready at once)
    campaign.pool = pool = Pool(workers, "campaigns.worker:handle", out / "workers",
                                init=("campaigns.worker_start:init", "campaigns.worker:init"),
                                init_arg={"coverage": coverage_file, "feedback": watched}, timeout=options.timeout,
                                memory_mb=memory_mb, worker_env=lambda index: worker_env(allocation, index),
                                preload=worker_preload(options.coverage))
    last_report = time.time()
    # The last part of the budget runs the repros nobody has run yet.
    verify_from = deadline - (min(30.0, 0.2 * (deadline - started)) if options.verify_repros else 0.0)
    verifying = False
    submitted = done_before  # --resume auto: the program count is the campaign's, not this invocation's
    complete = False
    stop_on = _stop_on_signals()

    drawn_out = False  # --batches: the shard's batches are all submitted

    def submitted_all() -> bool:
        return bool(options.programs) and submitted >= options.programs or drawn_out

    def finished() -> bool:
        if options.stop_on_new and any(not f["known_issue"] and sig not in options.stop_ignores
                                       for sig, f in ledger.findings.items()):
            return True
        if options.stop_on_op and options.stop_on_op in campaign.found_ops:
            return True
        # the programs submitted and their results in; the follow-ups begun are the campaign's too
        return submitted_all() and not campaign.programs \
            and not (campaign.minimizing or campaign.backlog or campaign.verifying) \
            and not (campaign.sweep is not None and (campaign.sweep.pending or campaign.sweep_singles
                                                      or campaign.sweep_inflight))

    try:
        campaign.tick_claims(force=True)
        while time.time() < deadline and not finished():
            stop_on.check()
            if time.time() >= verify_from:
                # the repros nobody has run yet go first, then the programs fill what workers are left: a
                # worker waiting out the budget beside one running a repro ran nothing (a fifth of a 120-s
                # campaign's last 24 s); no minimization begins once any repro of this part is running
                verifying = campaign.verify_rest() > 0 or verifying
            if loading is not None and not loading.done:
                if campaign.sweep is None:
                    campaign.sweep = Sweep(out, options.shard, caps.dtypes,
                                           {d: f"the capability probe: {options.backend} does not run {d}"
                                            for d in ("float32", "float64", "bfloat16", "float16") if d not in caps.dtypes},
                                           precision=dict(caps.precision), deferred=frozenset(op_expected()))
                campaign.sweep.add(loading.take())
                if loading.done:
                    log.write({"event": "sweep_loaded", "cells": campaign.sweep.total,
                               **({"error": loading.error} if loading.error else {})})
            while pool.pending < workers and time.time() < deadline - 1 and not submitted_all():
                swept = campaign.sweep_task(config, time.time() < sweep_until)
                if swept is not None:  # the sweep first, in its share of the budget; its follow-ups always
                    pool.submit(swept)
                    continue
                if campaign.steering is not None:
                    pid, program, origin = campaign.steering.next()
                else:
                    (pid, program), origin = next(source), None
                    if options.batches and stream_batch(pid, options.shard) >= options.batches:
                        drawn_out = True
                        break
                if time.time() >= sweep_until and campaign.op_due(options.op_share):
                    steered = campaign.sweep_task(config, False, search_seed=zlib.crc32(pid.encode()))
                    if steered is not None:  # the search's share of OpInfo batches: failing cells, untried ones
                        pool.submit(steered)
                        continue
                why = unfit(program, caps)
                if why:  # tests nothing of this backend: counted, never run
                    campaign.unfit[why] += 1
                    continue
                submitted += 1
                if options.autograd_share and not program.options.autograd:
                    feature = assign_autograd(f"{pid}:autograd", options.autograd_share, fitting_autograd(program))
                    program = replace(program, options=replace(program.options, autograd=(feature,))) if feature \
                        else program
                # door runs on inductor (a door only inductor can keep, the compile caches, or the share of the
                # others) wait until their share of the workers' seconds is earned, unless no other door was asked for
                inductor = bool(doors) and campaign.inductor_due(options.inductor_share, time.time())
                if doors:
                    program = with_door(program, assign(pid, options.door_share, doors if inductor else tuple(
                        d for d in doors if not DOORS[d].inductor) or doors, program))
                door = program.options.door
                door_backend = "inductor" if door and (inductor or DOORS[door].inductor) else ""
                campaign.inductor_out += bool(door_backend)
                task_config = config if mode != "inference" else {**config, "mode": program_mode(mode, program.seed)}
                if _lint(pid, options.lint_share) and has("graph_deduplication_lint"):
                    task_config = {**config, "torch_config": [*config["torch_config"],
                                                              ["dynamo.graph_deduplication_lint", True]]}
                campaign.programs[pid] = to_dict(program)
                if options.keep_programs:
                    with open(out / PROGRAMS, "a") as kept:
                        kept.write(json.dumps({"id": pid, "program": campaign.programs[pid]}) + "\n")
                pool.submit({"type": "run", "id": pid, "program": to_dict(program), "config": task_config,
                             **({"search": "other"} if time.time() >= sweep_until else {}),
                             "oracles": list(oracles), "device": options.device, "learned": dict(campaign.learned),
                             **({"door_backend": door_backend} if door_backend else {}),
                             **({"feedback": True, "origin": origin,
                                 "trace": in_share(f"{pid}:trace", options.trace_share)} if origin is not None else {})})
            for task, result in pool.results(0.5):
                campaign.on_result(task, result)
            campaign.tick_claims()
            if not verifying:
                campaign.start_minimizing(verify_from)
            if progress:
                progress(status_line(campaign, deadline, pool), False)
            if time.time() - last_report > 15:
                campaign.log_skipped()
                campaign.write_reports()
                last_report = time.time()
        complete = True
    except KeyboardInterrupt as e:
        stopped = f"stopped by {e.args[0]}" if isinstance(e, Stopping) else "interrupted"
        log.write({"event": "aborted", "reason": f"{stopped} (the same command line with --resume auto goes on)"})
    finally:
        pool.close(now=True)
        if loading is not None:
            loading.close()
        if campaign.claims is not None:
            campaign.claims.release()  # unfinished follow-ups: another shard, or this one requeued, takes them over
        log.write({"event": "stop", "seconds": round(time.time() - started, 3), "complete": complete})
    campaign.started = time.time()  # the stop event holds this invocation's seconds now
    env.wait()
    summary = campaign.write_reports(final=True)
    stop_on.restore()
    if progress:
        progress(f"done: {summary['programs']} programs in {summary['seconds']} s, "
                 f"{len(summary['findings'])} distinct findings", True)
    return summary


class Stopping(KeyboardInterrupt):
    """The scheduler stops this job (SIGTERM before a preemption, a time limit, a pod's deletion)."""


class _stop_on_signals:
    """SIGTERM (and SIGHUP) end the campaign as Ctrl-C does: its results are
    on disk, its reports written, a requeue goes on. The signal is noted and
    acted on between results (``check``), so a program's result is never
    half logged (its program event without its findings)."""

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.previous, self.received = {}, ""
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._note) for s in self.SIGNALS}

    def _note(self, signum, frame) -> None:
        self.received = self.received or signal.Signals(signum).name

    def check(self) -> None:
        if self.received:
            raise Stopping(self.received)

    def restore(self) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


def steering(options: Options, ledger: Ledger, source, torch_version: str) -> Steering:
    """The feedback loop of a steered campaign: its corpus (the one in its
    folder when resuming, others' read as they grow) and its bandit."""
    corpus = Corpus(options.out / CORPUS, torch_version, options.backend)
    corpus.load(options.out / CORPUS)
    steer = Steering(options.seed, options.shard, corpus, source, swarm_draw(options.seed, options.shard, set(ledger.done)),
                     shared=tuple(Path(c) for c in options.corpus), steer=options.feedback == "steer")
    steer.resume_from(ledger.done)
    return steer


def status_line(campaign: Campaign, deadline: float, pool: Pool) -> str:
    led = campaign.ledger
    elapsed = time.time() - campaign.started
    by = Counter(f["severity"] for f in led.findings.values())
    new = sum(1 for f in led.findings.values() if not f["known_issue"])
    kinds = ", ".join(f"{k} {by[k]}" for k in SEVERITIES if by[k]) or "none"
    return (f"[{elapsed:5.0f}s/{elapsed + max(0, deadline - time.time()):.0f}s] {led.programs} programs "
            f"({led.programs / elapsed if elapsed else 0:.2f}/s) | findings: {len(led.findings)} distinct ({kinds}), "
            f"{new} new | workers {pool.busy}/{len(pool.workers)} busy, {len(campaign.minimizing)} minimizing, "
            f"lost {sum(pool.lost.values())}")
