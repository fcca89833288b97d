"""CUDA-graph oracle: every replay against eager and against the plain compile.

Each call of a ``harness.replay`` run is judged like the differential oracle
judges one run (float64 referee, eager-twice nondeterminism gate, the same
tolerances), and the blame goes to CUDA graphs only when the same backend
without them got the call right. A graphed output or gradient held across
the next call must still hold its value, or reading it must raise PyTorch's
documented "overwritten by a subsequent run" error; a silent change is a
stale output. Whether CUDA graphs engaged at all is a verdict of its own
(``check_engaged``): a skip is inconclusive with PyTorch's reason, never a pass.
"""

from __future__ import annotations

import re

import torch

from generators.check import lowest_precision, zero_signs_determined
from harness.outcome import Execution
from harness.replay import OVERWRITTEN, Held, ReplayOutcome, snapshots

from .compare import bitwise_equal
from .differential import compare_runs, nondeterministic
from .hygiene import label
from .verdict import Status, Verdict, combine

NAME = "cudagraph"
ENGAGED = "cudagraph_engaged"


def _crash(f, **details) -> Verdict:
    where = f"call[{details['call']}]:{details['phase']}" if "call" in details else "compile"
    return Verdict(NAME, Status.FAIL, kind="crash", where=where, message=f"{f.type}: {f.message}",
                   details={"stage": f.stage, "type": f.type, "traceback": f.traceback, **details})


def _failing(expected: Execution, actual: Execution | None, reference: Execution | None, floor) -> set[str] | None:
    """Where ``actual`` disagrees with ``expected`` (None: it crashed)."""
    if actual is None or actual.failure is not None:
        return None
    return {v.where for v in compare_runs(NAME, expected, actual, reference, **floor) if v.failed}


def _judge_call(replay: ReplayOutcome, k: int, floor: dict) -> list[Verdict]:
    call = replay.calls[k]
    runs = call.runs
    eager, graphed, plain, reference = runs["eager"], runs["graphed"], runs["plain"], runs["reference"]
    at = {"call": k, "phase": call.phase, "shapes": call.shapes}
    if eager.failure is not None:  # a generator or plan bug, not the compiler's
        return [Verdict(NAME, Status.INCONCLUSIVE, kind="invalid_call", where=f"call[{k}]:{call.phase}",
                        message=f"eager fails this call: {eager.failure.type}: {eager.failure.message}")]
    if graphed.failure is not None:
        p = plain.failure
        return [_crash(graphed.failure, plain_crashed=p is not None, plain_failure=f"{p.type}: {p.message}" if p else "",
                       **at)]
    unstable = nondeterministic(eager, runs["eager_again"])
    if unstable:
        return [Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", where=f"call[{k}]:{unstable[0]}",
                        message="eager disagrees with itself; numerics not compared")]
    if eager.treespec != graphed.treespec or len(eager.outputs) != len(graphed.outputs):
        return [Verdict(NAME, Status.FAIL, kind="structure", where=f"call[{k}]:outputs", details=at,
                        message=f"expected output structure {eager.treespec}, got {graphed.treespec}")]
    out, plain_wrong, apart = [], None, None
    for v in compare_runs(NAME, eager, graphed, reference, **floor):
        if v.status is Status.PASS:
            out.append(v)
            continue
        if plain_wrong is None:  # once per call, and only for a call that needs it
            plain_wrong = _failing(eager, plain, reference, floor)
            apart = _failing(plain, graphed, reference, floor) if plain_wrong is not None else None
        plain_ok = plain_wrong is not None and v.where not in plain_wrong
        details = {**v.details, **at, "value": v.where, "plain_agrees": plain_ok,
                   "graphed_matches_plain": apart is not None and v.where not in apart}
        out.append(Verdict(NAME, v.status, kind=v.kind, where=f"call[{k}]:{call.phase}:{v.where}",
                           message=f"{v.message} ({call.phase} call {k}; the plain compile "
                                   f"{'agrees with eager' if plain_ok else 'is wrong too'})",
                           details=details))
    return out


def _eager_changed(replay: ReplayOutcome, held: Held) -> bool:
    """Eager's own result changed too: it aliases an input or buffer that the
    next call writes (a static input given new values, a running statistic)."""
    before = snapshots(replay.calls[held.call].runs["eager"]).get(held.where)
    for h in replay.held:
        if h.role == "eager" and (h.call, h.where, h.same_step) == (held.call, held.where, held.same_step):
            return h.value is None or not bitwise_equal(before, h.value)
    return False


def _judge_held(replay: ReplayOutcome) -> list[Verdict]:
    out = []
    for h in replay.held:
        if h.role != "graphed":
            continue
        before = snapshots(replay.calls[h.call].runs["graphed"]).get(h.where)
        where = f"call[{h.call}]:{h.where}"
        at = {"call": h.call, "phase": replay.calls[h.call].phase, "value": h.where}
        if h.same_step and (h.raised or not bitwise_equal(before, h.value)) and not _eager_changed(replay, h):
            out.append(Verdict(NAME, Status.FAIL, kind="overwritten_in_step", where=f"{where}:same-step",
                               details=at, message=f"{h.where} of call {h.call} was "
                               f"{'unreadable' if h.raised else 'changed'} after the next call of the same step "
                               f"(cudagraph_mark_step_begin() before the first); PyTorch documents results as live "
                               f"until the next step: {h.raised[:200]}"))
        elif h.raised:
            if OVERWRITTEN in h.raised:
                out.append(Verdict(NAME, Status.PASS, where=where, message="overwritten, and reading it says so"))
            else:
                out.append(Verdict(NAME, Status.FAIL, kind="read_error", where=where, details=at,
                                   message=f"reading a result of call {h.call} after the next call raised "
                                           f"something other than PyTorch's documented error: {h.raised[:300]}"))
        elif not bitwise_equal(before, h.value) and _eager_changed(replay, h):
            out.append(Verdict(NAME, Status.PASS, where=where, message="changed, as eager's result did"))
        elif not bitwise_equal(before, h.value):
            change = (h.value.double() - before.double()).abs().nan_to_num(float("inf"), float("inf")).max().item() \
                if isinstance(before, torch.Tensor) and before.shape == h.value.shape else float("nan")
            out.append(Verdict(NAME, Status.FAIL, kind="stale_output", where=where,
                               details={**at, "max_abs_change": change},
                               message=f"{h.where} of call {h.call} changed by up to {change:.3g} when the next "
                                       f"call ran, and reading it raised no error (PyTorch documents "
                                       f"'{OVERWRITTEN}' for overwritten CUDA-graph outputs)"))
        else:
            out.append(Verdict(NAME, Status.PASS, where=where, message="still holds its value"))
    return out


def _leaks(replay: ReplayOutcome) -> list[Verdict]:
    if not replay.leaked_state:
        return []
    leaks = replay.leaked_state
    return [Verdict(NAME, Status.FAIL, kind="leaked_state", where="process", message="; ".join(leaks),
                    details={"leaks": leaks, "label": label(leaks)})]


def verdicts(replay: ReplayOutcome) -> list[Verdict]:
    """One verdict per value of every call, and per held result; a compile
    that left dispatch state behind first (it breaks what runs after it)."""
    if replay.failure is not None:
        return [_crash(replay.failure)]
    floor = {"floor": getattr(torch, lowest_precision(replay.program)),
             "signed_zeros": zero_signs_determined(replay.program)}
    return _leaks(replay) + [v for k in range(len(replay.calls)) for v in _judge_call(replay, k, floor)] + \
        _judge_held(replay)


def check(replay: ReplayOutcome) -> Verdict:
    return combine(NAME, verdicts(replay))


def reason_key(message: str) -> str:
    """A skip reason without what varies between hits: the stack trace after
    "Found from", graph input names and numbers."""
    head = message.split("Found from")[0]
    return re.sub(r"\s+", " ", re.sub(r"\d+", "N", head)).strip().rstrip(".")[:160]


def check_engaged(replay: ReplayOutcome) -> Verdict:
    e = replay.engagement
    if replay.failure is not None or any(c.runs["graphed"].failure is not None for c in replay.calls):
        return Verdict(ENGAGED, Status.INCONCLUSIVE, kind="crashed", message="the graphed run crashed")
    if e.skips or e.skip_count:
        # PyTorch counts a skip of a graph with no CUDA device without logging why
        reasons = list(dict.fromkeys(e.skips)) or [f"{e.skip_count} skip(s) counted by PyTorch, no reason logged"]
        return Verdict(ENGAGED, Status.INCONCLUSIVE, kind="skipped", where=reason_key(reasons[0]),
                       message="; ".join(reasons)[:500], details={"reasons": reasons, "count": e.skip_count,
                                                                 "recorded": e.recorded})
    if e.recorded is None:
        return Verdict(ENGAGED, Status.INCONCLUSIVE, kind="unobservable",
                       message=f"no CUDA graph tree on {replay.device}: cannot tell whether CUDA graphs engaged")
    if e.recorded == 0:
        return Verdict(ENGAGED, Status.INCONCLUSIVE, kind="not_engaged",
                       message="no CUDA graph was recorded, and PyTorch logged no reason for skipping")
    return Verdict(ENGAGED, Status.PASS, message=f"{e.recorded} CUDA graphs recorded",
                   details={"recorded": e.recorded, "warnings": e.warnings})
