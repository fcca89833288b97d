"""The sweep before the search: every (op, spelling, dtype) of torch's OpInfo
database that the backend supports, once, in small programs of repeated blocks.

Cases go out in batches (``generators.opinfo.sweep_program``), in the order
of ``stage``: every op's simplest spelling at float32 first, then its other
spellings and its simplest at float64 (each at the pace its cost allows),
then the other dtypes; one batch in
eight makes the block a ``nested_compile_region`` body; a batch of spellings
other than their ops' simplest is judged forward only (``Sweep.forward_only``:
a spelling's gradient is its op's). A batch that passes
passes its cells; one whose values differ is judged case by case from its
one run (``sweep_task.per_case``); one that fails otherwise (a crash) is
halved until one case is left. A failing case runs as an ordinary program
(all oracles, triage, a minimized repro) and its findings are the cell's.
Once a cell fails with a new cause, the rest of its op moves to the front (a
backend that gets one spelling wrong often gets its neighbours wrong too).
Cells a record says fail (``reports/known_issues/op_expected.json`` for any
backend, OpInfo's own expected failures, ops with effect tokens: KI-120) and
the other dtypes of a spelling found failing with a known issue go last, in
small batches: one of them in a large batch fails it, and halving a batch
back to its case costs more compiles than the batch. The sweep's state is
``sweep.json`` in the campaign folder: a resumed campaign goes on where it
stopped and skips the sweep once it is done; a shard sweeps its own share of
cells. ``search_batch`` gives the steered search a batch of the cells the
sweep found failing with a new cause (their other samples) or never reached.
"""

from __future__ import annotations

import heapq
import json
import os
import zlib
from collections import Counter
from pathlib import Path

from generators.ir import from_dict, to_dict
from generators.opinfo import KINDS, Case, cases_of, halves, rounding_sensitive, split_cell, sweep_program

FILE = "sweep.json"
# Cases per batch. A compile's fixed cost dominates small batches, and a region's grows faster than its graph: per
# case in batches that formed a region, 148 ms at 24, 118 at 48, 119 at 96 (aot_eager, the sweep's first 200 cases,
# measured one after the other). A batch holding a case that breaks the graph forms no region and is judged again
# without it; halving a failing batch costs about two batches' compiles: so the cells a record says fail, and those
# that break the graph, go last, a few at a time (DEFERRED_BATCH).
BATCH = 48
DEFERRED_BATCH = 4  # cases per batch of cells expected to fail (``Sweep.deferred``)
DEFERRED = 99  # the stage of cells expected to fail: after every other
# One batch in this many is a nested_compile_region body. Its recorded crash (KI-003) and the two runs past it
# make such a batch cost about four plain ones: at one in four they took 55% of a backend campaign's sweep.
REGION_EVERY = 8
# Cases in a region batch. Its known crash on torch 2.13 (KI-003) and the two runs past it (deduplication off, the
# decorator removed) made a 48-case region batch cost 8.5 to 14 s against 1.2 to 6 s for a plain one: four of them
# took a fifth of a 120-s backend campaign's sweep.
REGION_BATCH = 16
DTYPE_ORDER = ("float32", "float64", "bfloat16", "float16", "int64", "bool")
# A cell's status: exercised = passed + failed + known + inconclusive.
STATUSES = ("passed", "failed", "known", "expected", "inconclusive", "unsupported", "invalid", "untried")


def stage(case: Case, default_kind: str, deferred: frozenset = frozenset()) -> int:
    """How far a cell is from the op's simplest form. 0: its simplest spelling at float32; 1: one step away,
    its other spellings at float32 and its simplest at float64 (the other full precision: a backend that
    computes float64 in float32 is as common a gap as a spelling); 2...: the rest, one stage per other dtype;
    ``DEFERRED``: a cell ``deferred`` names, OpInfo expects to fail, whose op threads an effect token, or that
    calls an op torch tags data-dependent (it breaks the graph: no case of its batch would be in a region)."""
    if case.cell in deferred or case.expected or case.effects or case.dynamic:
        return DEFERRED
    if case.dtype == "float32":
        return 0 if case.kind == default_kind else 1
    if case.dtype == "float64" and case.kind == default_kind:
        return 1
    return 1 + DTYPE_ORDER.index(case.dtype) if case.dtype in DTYPE_ORDER else len(DTYPE_ORDER) + 1


# What a cell of stage 1 costs, by how it is judged: a spelling forward only, the simplest at float64 with its
# gradient (48 cases: 0.5 to 1.6 s against 4.2 to 6.3 s on aot_eager). Stage 1 goes by op in the database's order
# in each kind at once, each at the pace its cost allows: by op alone, the gradients of the ops before it made
# the last spellings wait a third of a 120-s sweep; spellings first, the float64 cells waited for all of them.
STAGE1_COST = {True: 1, False: 4}  # forward only: cost


def _key(cases: list[Case]) -> tuple:
    return tuple((c.cell, c.sample, c.item) for c in cases)


def _mine(cell: str, shard: tuple[int, int]) -> bool:
    index, count = shard
    return count <= 1 or zlib.crc32(cell.encode()) % count == index


class Sweep:
    def __init__(self, out: Path | None, shard: tuple[int, int] = (0, 1), dtypes: tuple[str, ...] = (),
                 unsupported_dtypes: dict[str, str] | None = None, batch: int = BATCH, region: bool | None = None,
                 precision: dict[str, str] | None = None, deferred: frozenset = frozenset()):
        """``out``: the campaign folder its state lives in (None: kept in memory); ``region``: every batch a
        nested_compile_region body (True), none (False), one in REGION_EVERY (None); ``deferred``: cells a
        record says fail (``reports.known_issues.op_expected``), judged last."""
        self.path, self.batch, self.shard, self.region = out / FILE if out else None, batch, shard, region
        self.dtypes, self.unsupported_dtypes = dtypes, unsupported_dtypes or {}
        self.precision = precision or {}  # dtype -> the lower one the backend computes it in (its probe)
        self.deferred = frozenset(deferred)
        self.samples: dict[str, list[Case]] = {}  # every sample of a cell, in the database's order
        self.queue: list = []  # (priority, n, case): the first sample of each cell not yet judged
        self.pending: list[tuple[list[Case], bool]] = []  # halves of failing batches, judged first
        self.ops: dict[str, int] = {}  # op -> its place in the database
        self.default_kind: dict[str, str] = {}  # op -> its simplest spelling at float32 (``stage``)
        self._n = 0  # cases queued so far (the queue's tie-break)
        self._spent = {True: 0, False: 0}  # stage 1's cells queued so far, at their cost, by forward only
        state = json.loads(self.path.read_text()) if self.path and self.path.exists() else {}
        self.cells: dict[str, dict] = state.get("cells", {})
        self.combinations: list[dict] = state.get("combinations", [])  # failures of cases together (single_judged)
        self._parents: dict[tuple, dict] = {}  # a half -> the failing batch it came from (judged)
        self.batches = state.get("batches", 0)
        self.seconds = state.get("seconds", 0.0)

    def add(self, cases: list[Case]) -> None:
        """More of the database's cases (whole ops), as they are built: their cells join the queue."""
        fresh: dict[str, list[Case]] = {}
        for case in cases:
            if _mine(case.cell, self.shard):
                fresh.setdefault(case.cell, []).append(case)
                self.ops.setdefault(case.op, len(self.ops))
        first_kind: dict[str, str] = {}
        for cell in fresh:
            op, kind, dtype = split_cell(cell)
            if dtype == "float32":
                first_kind[op] = min(first_kind.get(op, kind), kind, key=KINDS.index)
        self.default_kind.update(first_kind)
        for cell, samples in fresh.items():
            self.samples.setdefault(cell, []).extend(samples)
            op, kind, dtype = split_cell(cell)
            if self.cells.get(cell, {}).get("status", "untried") != "untried":
                continue
            if self.dtypes and dtype in ("float32", "float64", "bfloat16", "float16") and dtype not in self.dtypes:
                self.cells[cell] = {"status": "unsupported", "reason": self.unsupported_dtypes.get(dtype, f"dtype {dtype}")}
                continue
            if dtype in self.precision:  # judged at a lower precision: what rounding decides is not judged
                samples = [c for c in samples if not rounding_sensitive(c)]
                if not samples:
                    self.cells[cell] = {"status": "unsupported", "reason": f"rounding-sensitive: the backend "
                                                                           f"computes {dtype} in {self.precision[dtype]}"}
                    continue
            self.cells[cell] = {"status": "untried"}
            for case in samples:
                if case.sample == samples[0].sample:  # every item of the first sample
                    self._n += 1
                    n = self._n
                    at = stage(case, first_kind.get(op, "torch"), self.deferred)
                    order = self.ops[op]
                    if at == 1:  # each kind of cell at the pace its cost allows (STAGE1_COST)
                        forward = kind != first_kind.get(op, "torch")
                        if case is samples[0]:  # once a cell, whose items share its place
                            self._spent[forward] += STAGE1_COST[forward]
                        order = self._spent[forward]
                    heapq.heappush(self.queue, ((at, order, KINDS.index(kind), n), n, case))

    @property
    def total(self) -> int:
        return len(self.samples)

    # --- what goes out -----------------------------------------------------

    @property
    def done(self) -> bool:
        return not self.queue and not self.pending

    def next_batch(self) -> tuple[list[Case], bool | None] | None:
        """The next cases to judge together (one output dtype), and whether in a region body (one batch in
        REGION_EVERY, of at most REGION_BATCH cases, unless the sweep's ``region`` says otherwise)."""
        if self.pending:
            return self.pending.pop()
        if not self.queue:
            return None
        top = heapq.heappop(self.queue)
        first, deferred = top[2], top[0][0] == DEFERRED
        forward = self.forward_only([first])
        batch, kept = [first], []
        region = self.region if self.region is not None else (self.batches + 1) % REGION_EVERY == 0  # program()'s turn
        limit = min(self.batch, DEFERRED_BATCH) if deferred else min(self.batch, REGION_BATCH) if region else self.batch
        # the batch is filled from the first case's whole stage: cases that cannot join it (another output dtype,
        # judged with gradients or without) are left for their own batches, which a nearer horizon made small
        # (a third of a 120-s sweep's batches held 12 cases or fewer, each paying a compile's fixed cost)
        while self.queue and len(batch) < limit and self.queue[0][0][0] == top[0][0]:
            item = heapq.heappop(self.queue)
            if item[2].out.dtype == first.out.dtype and self.forward_only([item[2]]) == forward:
                batch.append(item[2])
            else:
                kept.append(item)
        for item in kept:
            heapq.heappush(self.queue, item)
        return batch, region

    def forward_only(self, cases: list[Case]) -> bool:
        """Whether a batch of ``cases`` is judged forward only: none is its op's simplest spelling. Every other
        spelling (a method, in place, an operator, the functional or aten form, ``out=``) is the same aten op
        once AOTAutograd has traced it, with the same derivative: a spelling a backend mishandles is a
        conversion of the forward graph's node. Its op's gradient is judged, at every dtype, through the
        simplest spelling; forward only, a batch compiles in about 40% of the time (no joint graph, no
        partition: 48 float32 cases, 1.2 to 2.0 s against 2.9 to 5.4 s on aot_eager), so a 120-s campaign
        reaches the other spellings of every op."""
        return all(c.kind != self.default_kind.get(c.op, "torch") for c in cases)

    def batch_config(self, cases: list[Case], config: dict) -> dict:
        """The run config (``campaigns.task_config``) a batch of ``cases`` is judged under: training, as the
        campaign runs, unless the batch is judged forward only."""
        return {**config, "mode": "no_grad"} if config.get("mode") == "train" and self.forward_only(cases) else config

    def program(self, cases: list[Case], region: bool | None = None) -> dict:
        self.batches += 1
        if region is None:
            region = self.region if self.region is not None else self.batches % REGION_EVERY == 0
        return to_dict(sweep_program(cases, region=region, seed=self.batches))

    # --- what comes back -----------------------------------------------------

    def judged(self, program: dict, result: dict) -> list[dict]:
        """A batch's runs: its cells' statuses; the programs to run next (halves, or
        the one failing case as an ordinary program: ``{"single": program}``). A batch
        whose halves both pass failed through cases of both: it runs whole as an ordinary
        program (``{"single": ..., "combination": True}``), whose minimization finds them."""
        p = from_dict(program)
        parent = self._parents.pop(_key(cases_of(p)), None)
        follow = self._judged(p, program, result)
        if parent is not None:
            parent["failed"] |= any(r["status"] in ("fail", "unsupported", "invalid") for r in result.get("runs", []))
            parent["left"] -= 1
            if not parent["left"] and not parent["failed"]:
                self.batches += 1
                whole = to_dict(sweep_program(parent["cases"], region=parent["region"], seed=self.batches))
                follow.append({"single": whole, "combination": True})
        return follow

    def _halve(self, cases: list[Case], region: bool, failed: bool = False) -> None:
        """``failed``: the batch did not fail, nothing runs whole when its halves pass."""
        record = {"cases": cases, "region": region, "left": 2, "failed": failed}
        for half in reversed(halves(cases)):
            self._parents[_key(half)] = record
            self.pending.append((half, region))

    def _judged(self, p, program: dict, result: dict) -> list[dict]:
        """``p``: ``program`` read (``from_dict``) once by ``judged``."""
        self.seconds += float(result.get("seconds", 0.0))
        cases = cases_of(p)
        runs = result.get("runs", [])
        judged = [r for r in runs if not r.get("masked")]
        masked = [r["masked"] for r in runs if r.get("masked")]
        if masked and not judged:  # a recorded crash that no run without its trigger got past: find its case
            if len(cases) > 1:
                self._halve(cases, p.block.compile_region)
            else:
                self.set_status(cases[0], "known", masked[0])
                self._defer(cases[0])
            return []
        if any(r.get("placed") is False for r in judged):  # a case broke the graph: no region formed
            named = next((r["outside"] for r in judged if r.get("placed") is False and r.get("outside")), [])
            if len(cases) > 1 and 0 < len(named) < len(cases):  # the cases no graph computes: alone, the rest again
                self.pending.append(([c for k, c in enumerate(cases) if k not in named], p.block.compile_region))
                self.pending += [([cases[k]], p.block.compile_region) for k in named]
                return []
            if len(cases) > 1:
                self._halve(cases, p.block.compile_region, failed=True)
                return []
            unplaced = "not in a region: the case breaks the graph"
            self._move(lambda c: c.op == cases[0].op, DEFERRED)  # its op's other cells mostly break it too
        else:
            unplaced = ""
        bad = [r for r in judged if r["status"] in ("fail", "unsupported", "invalid")]
        note = "; ".join(n for n in (("masked " + ", ".join(masked)) if masked else "", unplaced) if n)
        unjudged = [r for r in judged if r["status"] != "pass"]
        if len(cases) > 1 and unjudged and all(r.get("cases") for r in unjudged):
            # every run that did not pass says which cases did not (sweep_task.per_case): no halving, no re-run
            follow = []
            for k, case in enumerate(cases):
                said = [r["cases"][k] for r in unjudged]
                if "fail" in said:
                    follow += self._alone(case, p.block.compile_region)
                elif "inconclusive" in said:
                    self.set_status(case, "inconclusive", "a value of it no float64 referee settles, in its batch")
                else:
                    self.set_status(case, "passed", note)
            return follow
        if not bad:
            status = "inconclusive" if any(r["status"] == "inconclusive" for r in judged) else "passed"
            for case in cases:
                self.set_status(case, status, note)
            return []
        if len(cases) > 1:
            k = bad[0].get("blame")
            if k is not None and 0 <= k < len(cases):  # the wrong value names its case: it runs alone, the rest again
                rest = cases[:k] + cases[k + 1:]
                if rest:
                    self.pending.append((rest, p.block.compile_region))
                return self._alone(cases[k], p.block.compile_region)
            self._halve(cases, p.block.compile_region)
            return []
        return self._alone(cases[0], p.block.compile_region, bad[0], program)

    def _alone(self, case: Case, region: bool, bad: dict | None = None, program: dict | None = None) -> list[dict]:
        """One failing case: an ordinary program of it (unless the backend or the database explains it)."""
        bad = bad or {"status": "fail"}
        if bad["status"] == "unsupported":
            self.set_status(case, "unsupported", bad["message"])
            return []
        if bad["status"] == "invalid":
            self.set_status(case, "invalid", bad["message"])
            return []
        if case.expected:
            self.set_status(case, "expected", case.expected)
            return []
        if program is None:
            self.batches += 1
            program = to_dict(sweep_program([case], region=region, seed=self.batches))
        return [{"single": program}]

    def single_judged(self, program: dict, findings: list[dict]) -> None:
        """The ordinary run of one failing case: its findings are the cell's. A batch run whole (its failure
        needs cases of both halves) is kept apart: its findings belong to no one cell."""
        cases = cases_of(from_dict(program))
        if len(cases) > 1:
            self.combinations.append({"cells": sorted({c.cell for c in cases}),
                                      "findings": sorted({f.get("known_issue") or f["signature"] for f in findings})})
            return
        for case in cases:
            if not findings:
                self.set_status(case, "inconclusive", "failed in its batch, passed alone")
            elif all(f.get("known_issue") for f in findings):
                self.set_status(case, "known", ", ".join(sorted({f["known_issue"] for f in findings})))
                self._defer(case)
            else:
                self.set_status(case, "failed", ", ".join(sorted({f["signature"] for f in findings if not f.get("known_issue")})))
                self._promote(case.op)  # a new cause: the rest of its op goes first (a known one's does not)

    def set_status(self, case: Case, status: str, reason: str = "") -> None:
        entry = self.cells.setdefault(case.cell, {"status": "untried"})
        rank = {"failed": 5, "known": 4, "unsupported": 3, "invalid": 3, "expected": 3, "inconclusive": 2, "passed": 1,
                "untried": 0}
        if rank[status] >= rank.get(entry["status"], 0):
            entry.update(status=status, **({"reason": reason} if reason else {}))

    def _promote(self, op: str) -> None:
        """The op's cells still queued go first."""
        self._move(lambda c: c.op == op, -1)

    def _defer(self, case: Case) -> None:
        """The spelling's other dtypes still queued go last: a known issue met by one mostly meets them all."""
        self._move(lambda c: (c.op, c.kind) == (case.op, case.kind), DEFERRED)

    def _move(self, which, to: int) -> None:
        self.queue = [(((to,) + item[0][1:]), item[1], item[2]) if which(item[2]) else item for item in self.queue]
        heapq.heapify(self.queue)

    # --- the steered search ----------------------------------------------------

    def search_batch(self, seed: int) -> tuple[list[Case], bool | None] | None:
        """Cases for a search program: other samples of cells failing with a new cause first (every other
        one), then untried cells."""
        failing = [c for c, e in self.cells.items() if e["status"] == "failed" and len(self.samples.get(c, [])) > 1]
        if failing and seed % 2:
            cell = failing[seed // 2 % len(failing)]
            cases = [c for c in self.samples[cell] if c.sample != self.samples[cell][0].sample]
            if cases:
                return [c for c in cases if c.out.dtype == cases[0].out.dtype][: self.batch], None
        return self.next_batch()

    # --- the figure ------------------------------------------------------------

    def table(self) -> dict:
        counts = Counter(e["status"] for e in self.cells.values())
        return {"cells": self.total, "batches": self.batches, "seconds": round(self.seconds, 1), "done": self.done,
                "combinations": self.combinations,
                "counts": {s: counts.get(s, 0) for s in STATUSES},
                "exercised": sum(counts.get(s, 0) for s in ("passed", "failed", "known", "inconclusive", "expected")),
                "by_cell": self.cells}

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"cells": self.cells, "batches": self.batches, "seconds": round(self.seconds, 3),
                                   "combinations": self.combinations}))
        tmp.replace(self.path)


# --- starting it ------------------------------------------------------------------

MODES = ("auto", "on", "off")


def wanted(mode: str, backend: str) -> bool:
    """"auto": every backend but the default aot_eager, whose op-level behaviour is eager's own."""
    return mode == "on" or (mode == "auto" and backend != "aot_eager")


class Loading:
    """The database's cases: read from the cache, or built op by op by a process of its own (about half a
    minute the first time per torch version) while the campaign begins; ``take`` hands over what is ready."""

    def __init__(self, ops: tuple[str, ...] = ()):
        from harness.opinfo_db import cache_path

        self.path, self.error, self.offset, self.proc, self.ops = cache_path(), "", 0, None, ops
        self.partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.partial")
        self.done = False
        if not self.path.exists() and not ops:
            import subprocess
            import sys

            self.partial.parent.mkdir(parents=True, exist_ok=True)
            self.proc = subprocess.Popen([sys.executable, "-m", "harness.opinfo_db", "--build", str(self.partial)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def take(self) -> list[Case]:
        """The cases built since the last call ([] once all are taken)."""
        from harness.opinfo_db import load, read_partial, select

        if self.done:
            return []
        if self.proc is None:
            self.done = True
            return select(self.ops) if self.ops else load(self.path)
        finished = self.proc.poll() is not None
        cases, self.offset, error = read_partial(self.partial, self.offset)
        if finished:
            self.done = True
            more, self.offset, error = read_partial(self.partial, self.offset)
            cases += more
            self.error = error or (f"the build exited {self.proc.returncode}" if self.proc.returncode else "")
            self.partial.unlink(missing_ok=True)
        return cases

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self.partial.unlink(missing_ok=True)


def start(mode: str, backend: str, ops: tuple[str, ...] = ()) -> Loading | None:
    """``ops``: sweep these OpInfo ops alone (names as ``harness.opinfo_db.op_name`` gives them)."""
    return Loading(ops) if wanted(mode, backend) or ops else None


def judge_locally(cases: list[Case], config: dict, region: bool = False) -> dict[str, dict]:
    """Every cell of ``cases`` judged in this process (the pytest plugin's conformance suite): batches,
    halves of failing ones, and a case failing alone taken as its cell's failure (no triage here)."""
    from .sweep_task import run_batch

    sweep = Sweep(None, region=region)
    sweep.add(cases)
    while (picked := sweep.next_batch()) is not None:
        program = sweep.program(*picked)
        result = run_batch({"program": program, "config": config})
        cause = None  # the known issue the batch meets, asked only where a case fails in it and passes alone
        for single in sweep.judged(program, result):
            alone = result if single["single"] is program else run_batch({"program": single["single"], "config": config})
            bad = [r for r in alone["runs"] if not r.get("masked") and r["status"] != "pass"]
            together = "with the other cases of its batch only: " if single.get("combination") else ""
            for case in cases_of(from_dict(single["single"])):
                if bad:
                    sweep.set_status(case, "failed" if bad[0]["status"] == "fail" else bad[0]["status"],
                                     f"{together}{bad[0]['kind']} at {bad[0].get('where') or '-'}: {bad[0]['message']}")
                elif not together:
                    cause = _known_cause(program, config) if cause is None else cause
                    sweep.set_status(case, "known" if cause else "inconclusive",
                                     f"{cause}, met by its batch (passed alone)" if cause else
                                     "failed in its batch, passed alone")
    return sweep.cells


def _known_cause(program: dict, config: dict) -> str:
    """The known issue a failing batch meets, by the triage a campaign gives a finding ("": none): a torch bug
    only the batch's cases together reach (two calls of a block holding both) is no case's failure, nor a
    false alarm."""
    from harness.pipeline import run_program
    from oracles import differential
    from reports.known_issues import match
    from reports.triage import triage

    from .sweep_task import JUDGED
    from .task_config import config_from, needing

    outcome = run_program(from_dict(program), needing(config_from(config), JUDGED))
    verdict = differential.check(outcome)
    issue = match(triage(outcome, verdict).signature, outcome.config.backend) if verdict.failed else None
    return issue.id if issue is not None else ""
