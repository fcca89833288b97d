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

import math
import re
import time

from generators.ir import from_dict
from generators.opinfo import cases_of
from harness.pipeline import InvalidProgram, run_program
from oracles import differential
from reports.known_issues import crash_issue
from reports.unmask import unmasked_runs

from .task_config import config_from, needing

JUDGED = ("differential",)


def blame(program, where: str, details: dict) -> int | None:
    """The case a wrong value belongs to, where the value says: a gradient names its case's input
    (``c<k>_<j>``), an element of the joined output its offset; None where it cannot (a crash)."""
    cases = cases_of(program)
    match = re.fullmatch(r"grad\[c(\d+)_\d+\]", where or "")
    if match:
        return int(match.group(1))
    index = details.get("index")
    if (where or "").startswith("output[") and where != "output[0]" and isinstance(index, list) and len(index) == 1:
        offset = 0
        for k, case in enumerate(cases):
            offset += math.prod(case.out.shape)
            if index[0] < offset:
                return k
    return None


def _judged(program, config) -> dict:
    try:
        verdict = differential.check(run_program(program, needing(config, JUDGED)))
    except InvalidProgram as e:
        return {"status": "invalid", "kind": "invalid", "message": str(e)[:500]}
    status = "unsupported" if verdict.kind == "unsupported" else verdict.status.value
    judged = {"status": status, "kind": verdict.kind, "message": (verdict.message or "")[:500], "where": verdict.where}
    if verdict.failed:
        judged["blame"] = blame(program, verdict.where, verdict.details or {})
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
