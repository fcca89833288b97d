"""A worker's judgment of one sweep batch (``campaigns.op_sweep``): many OpInfo
cases in one program, judged by the differential oracle alone.

No triage here: a batch is a means of judging many cases with one compile,
not a finding. A failing batch is halved by the driver until one case is
left, and that one runs as an ordinary program (all oracles, triage,
minimization). A known crash (``reports.known_issues.crash_issue``) does not
hide the batch: it is judged again without each of the issue's triggers
that it has (``reports.unmask``), so a batch of region bodies that a
recorded dedup crash stops is still judged with deduplication off and with
the decorator removed.
"""

from __future__ import annotations

import itertools
import math
import re
import time

import torch

from generators.ir import from_dict
from generators.opinfo import cases_of
from harness.outcome import Execution
from harness.pipeline import InvalidProgram, run_program
from oracles import differential
from reports.known_issues import crash_issue
from reports.unmask import unmasked_runs

from .task_config import config_from, needing

JUDGED = ("differential",)


def blame(program, where: str, details: dict) -> int | None:
    """The case a wrong (or unsettled) value belongs to, where the value says: a gradient names its case's
    input (``grad[input:c<k>_<j>]``), an element of the joined output its offset; None where it cannot (a crash)."""
    cases = cases_of(program)
    match = re.fullmatch(r"grad\[(.*)\]", where or "")
    if match:
        return _case_of(match.group(1))
    index = details.get("index")
    if (where or "").startswith("output[") and where != "output[0]" and isinstance(index, list) and len(index) == 1:
        offset = 0
        for k, case in enumerate(cases):
            offset += math.prod(case.out.shape)
            if index[0] < offset:
                return k
    return None


def _case_of(key: str) -> int | None:
    """The case an input (``input:c<k>_<j>``, a repeat's copy ``input:c<k>_<j>_<r>``) belongs to."""
    match = re.fullmatch(r"input:c(\d+)_\d+(?:_\d+)?", key)
    return int(match.group(1)) if match else None


def _split(run: Execution | None, cases: list) -> list[Execution | None]:
    """A batch's run as one run per case: its slice of every joined output (output[0] is the carried input,
    the first case's), its inputs' gradients and states. Raises KeyError for a value no case owns."""
    if run is None:
        return [None] * len(cases)
    ends = list(itertools.accumulate(math.prod(c.out.shape) for c in cases))
    parts = [Execution() for _ in cases]
    for i, value in enumerate(run.outputs):
        if i and isinstance(value, torch.Tensor) and value.shape == (ends[-1],):
            for part, start, end in zip(parts, [0, *ends], ends):
                part.outputs.append(value[start:end])
        elif i:
            raise KeyError(f"output[{i}]")
        else:
            parts[0].outputs.append(value)
    for field in ("grads", "state"):
        for key, value in getattr(run, field).items():
            k = _case_of(key)
            if k is None or k >= len(cases):
                raise KeyError(key)
            getattr(parts[k], field)[key] = value
    return parts


def per_case(outcome, program) -> list[str] | None:
    """Each case's verdict from the batch's one run ("pass", "fail", "inconclusive"), its values compared as
    the differential oracle compares them: a batch with one wrong case need not run again without it. None
    where the run's failure is not in values a case owns (a crash, the outputs' structure, requires_grad)."""
    cases = cases_of(program)
    if len(cases) < 2 or outcome.compiled.failure is not None or outcome.eager.failure is not None \
            or len(outcome.eager.outputs) != len(outcome.compiled.outputs):
        return None
    try:
        runs = [_split(r, cases) for r in (outcome.eager, outcome.compiled, outcome.reference, outcome.low_reference)]
    except KeyError:
        return None
    numerics = differential.numerics(outcome)
    return [differential.combine(differential.NAME, differential.compare_runs(
        differential.NAME, e, c, r, requires_grad=False, noise=low, **numerics)).status.value
        for e, c, r, low in zip(*runs)]


def outside(program, graphs: list[str]) -> list[int]:
    """The cases no graph computes (their statement ``v<k> = ...`` assigned in none): the ones that broke the
    graph and ran in Python. [] where every case is in some graph (then the cause is not one case's)."""
    return [k for k in range(len(cases_of(program)))
            if not any(re.search(rf"^\s*v{k}(?:_\d+)? = ", g, re.M) for g in graphs)]


def _judged(program, config) -> dict:
    try:
        outcome = run_program(program, needing(config, JUDGED))
    except InvalidProgram as e:
        return {"status": "invalid", "kind": "invalid", "message": str(e)[:500]}
    verdict = differential.check(outcome)
    status = "unsupported" if verdict.kind == "unsupported" else verdict.status.value
    judged = {"status": status, "kind": verdict.kind, "message": (verdict.message or "")[:500], "where": verdict.where}
    if outcome.compiled.failure is None and (config.dedup or program.block.compile_region):
        # whether the block became a region: a case that breaks the graph keeps every case of its batch out of one
        judged["placed"] = outcome.capture.deduplicated
        if not outcome.capture.deduplicated:
            judged["outside"] = outside(program, outcome.capture.graphs)
    if verdict.failed or status == "inconclusive":
        judged["blame"] = blame(program, verdict.where, verdict.details or {})
        cases = per_case(outcome, program) if verdict.kind not in ("requires_grad", "aliasing", "version", "nondeterministic") \
            else None
        if cases is not None and (status != "fail" or "fail" in cases):  # never fewer failures than the whole
            judged["cases"] = cases
    return judged


def run_batch(task: dict) -> dict:
    started = time.time()
    program, config = from_dict(task["program"]), config_from(task["config"])
    main = {"label": "main", **_judged(program, config)}
    runs = [main]
    issue = crash_issue(main["message"]) if main["kind"] == "crash" else None
    if issue is not None:
        main["masked"] = issue.id
        for trigger, p, c, _ in unmasked_runs(program, config, [(issue, "differential", True)], JUDGED):
            runs.append({"label": f"unmasked:{trigger}", **_judged(p, c)})
    return {"runs": runs, "seconds": round(time.time() - started, 3)}
