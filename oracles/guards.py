"""Guard oracle: a compiled graph is reused only while it is still right.

The harness re-calls the compiled program after one change at a time
(``harness.recall``). On each changed call:

- the compiled result must equal eager on the change (the differential
  comparison, fp64-refereed, behind an eager nondeterminism gate). A wrong
  result served by an entry compiled before the change is *stale*: a guard
  that should have rejected the call did not; that is this oracle's main
  finding. A wrong result after a recompile is a miscompile of the new entry.
- an entry that recompile added must be right for every call its guards
  accept: where it accepts the call without the change, its code is run on
  that call (``harness.recall.run_reverse``) and compared with eager
  (*over_accepting*: a guard too weak in the other direction, which Dynamo's
  cache order may hide from the changed calls themselves).
- with deduplication off (the ``dedup_off`` companion, when it re-called the
  same changes) the same changes recompile, and with the same new guards.

``recompiles`` (severity "recompile") reads the same calls for the opposite
mistake: a change that cannot alter the program's meaning (``neutral``) must
not recompile, and the entry of the first call must accept that call again.
"""

from __future__ import annotations

import torch

from generators.autograd import TRACE
from harness.outcome import Capture, Execution, Outcome, VariantRun

from .dedup_toggle import guard_difference
from .differential import compare_runs, nondeterministic, numerics, refused
from .tolerance import for_dtype
from .verdict import Status, Verdict, combine

NAME = "guards"
RECOMPILES = "recompiles"
NEEDS = ("dedup_off",)
VARIANTS = 3  # changed calls per program unless the run asks for more


def _ran(runs: list[VariantRun]) -> list[VariantRun]:
    """The changed calls made: not those eager could not run, nor those a run
    without deduplication skipped as needless (harness.recall.needless)."""
    return [r for r in runs if not r.invalid and not r.skipped]


def _details(run: VariantRun, label: str | None = None) -> dict:
    """What a finding on ``run`` carries; ``label`` names it for triage
    (without one, triage names it like a differential finding)."""
    return {
        **({"label": label} if label else {}),
        "variant": run.variant,
        "guards": run.guards,
        "original_accepts": run.original_accepts,
        "original_rejects_because": run.original_rejects_because,
        "served_by_original": run.served_by_original,
        "recompiled": run.recompiled,
        "recompile_reasons": run.recompile_reasons,
        "before": run.before,  # the repro replays them first (reports.repro.driver_for)
    }


def _floor(outcome: Outcome, run: VariantRun) -> dict:
    """The program's numerics (differential.numerics) with its precision
    floor lowered to the dtype the change brings in, if less precise (an
    input cast to bfloat16, autocast to bfloat16)."""
    num = numerics(outcome)
    brought = run.variant.get("dtype")
    if brought and for_dtype(getattr(torch, brought)).atol > for_dtype(num["floor"]).atol:
        num["floor"] = getattr(torch, brought)
    return num


# Changes to a tensor input that Dynamo's tensor guard (TENSOR_MATCH: dtype, device, rank, sizes and strides
# unless symbolic, requires_grad, dispatch keys) always rejects: kind -> what the guard checks. Shapes and
# layouts are left out (a dynamic dimension, a stride Dynamo does not specialize on, may accept them).
TENSOR_GUARDED = {"input:dtype": "the dtype", "input:rank": "the number of dimensions"}


def tensor_matched(capture: Capture) -> frozenset[str]:
    """The program inputs a one-graph capture guards with TENSOR_MATCH (guards recorded by
    ``guard_filter_fn``, harness.observe): one graph, so the first call's entry holds them all."""
    if capture.frames != 1 or capture.graph_breaks:
        return frozenset()
    names = (g.removeprefix("TENSOR_MATCH ") for g in capture.guards if g.startswith("TENSOR_MATCH "))
    return frozenset(n[3:-2] if n.startswith("L['") and n.endswith("']") else n for n in names)  # x, or L['x']


def _judge_call(run: VariantRun, floor: dict, matched: frozenset[str] = frozenset(), program=None) -> Verdict:
    v = run.variant
    where = f"variant {v['kind']} ({v['description']})"
    if run.compiled.failure is not None:
        f = run.compiled.failure
        if refused(program, f):  # torch documents it refuses what the program's autograd feature asks
            return Verdict(NAME, Status.INCONCLUSIVE, kind="unsupported", where=where, message=f"{f.type}: {f.message}")
        return Verdict(NAME, Status.FAIL, kind="crash", where=where, message=f"{f.type}: {f.message}",
                       details={**_details(run, f"crash:{v['kind']}"), "stage": f.stage, "traceback": f.traceback})
    if nondeterministic(run.eager, run.eager_again):
        return Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", where=where,
                       message="eager disagrees with itself under this change")
    if run.eager.treespec != run.compiled.treespec:
        bad = [Verdict(NAME, Status.FAIL, kind="structure", where="outputs",
                       message=f"expected {run.eager.treespec}, got {run.compiled.treespec}")]
    else:
        bad = [x for x in compare_runs(NAME, run.eager, run.compiled, run.reference, **floor)
               if x.status is not Status.PASS]
    failure = combine(NAME, bad) if bad else None
    if failure is None and v["kind"] in TENSOR_GUARDED and v["target"] in matched \
            and run.served_by_original and not run.recompiled:
        # Right values prove nothing here: the entry's graph was traced for the old dtype or rank, and a backend
        # that specializes on it (inductor's kernels) computes garbage; a backend that runs ops as they come
        # (aot_eager) hides it. The guard Dynamo installed says it checks this.
        return Verdict(NAME, Status.FAIL, kind="unguarded", where=where, details=_details(run, f"unguarded:{v['kind']}"),
                       message=f"after changing {v['description']}, the entry compiled for the first call served the "
                               f"call without recompiling, though its TENSOR_MATCH guard on {v['target']} checks "
                               f"{TENSOR_GUARDED[v['kind']]}")
    if failure is None:
        return Verdict(NAME, Status.PASS, where=where)
    if failure.status is Status.INCONCLUSIVE:
        return Verdict(NAME, Status.INCONCLUSIVE, kind=failure.kind, where=where, message=failure.message)
    found = {"value": failure.where, "difference": failure.kind}
    if run.recompiled:
        # A miscompile of the entry compiled for the change, not a guard's
        # fault: named like the differential oracle's findings (kind of
        # difference; triage adds what difference between repeats it needs).
        details = {**_details(run), **found}
        return Verdict(NAME, Status.FAIL, kind=failure.kind, where=where, details=details,
                       message=f"after changing {v['description']} the call recompiled, and the new entry is wrong: "
                               f"{failure.kind} at {failure.where} ({failure.message})")
    served = "the entry compiled for the first call" if run.served_by_original else "an entry compiled before it"
    details = {**_details(run, f"stale:{v['kind']}"), **found}
    return Verdict(NAME, Status.FAIL, kind="stale", where=where, details=details,
                   message=f"after changing {v['description']}, {served} was reused without recompiling and "
                           f"returned a stale result: {failure.kind} at {failure.where} ({failure.message})")


def _against_dedup_off(outcome: Outcome) -> list[Verdict]:
    off = outcome.companions.get("dedup_off")
    if off is None or not off[1].variants or "dedup_off" in outcome.spared:
        return []
    # Guards follow values: a float the program hands Python (an .item() the
    # frame resumes with) is specialized or not by whether it changed between
    # calls, to the last bit. Once deduplication has changed the bits of a
    # call's outputs (noise, or a wrong value other oracles report), later
    # guards may differ for that reason alone.
    num = numerics(outcome)

    def differ(a: Execution, b: Execution) -> bool:
        return a.failure is None and b.failure is None and any(
            v.failed for v in compare_runs(NAME, a, b, None, exact=("output",), **num))

    out = []
    if differ(off[0], outcome.compiled):
        return out
    for on_run, off_run in zip(outcome.capture.variants, off[1].variants):  # one selection, in one order
        if on_run.invalid or off_run.invalid or off_run.skipped:  # skipped: nothing it could tell
            continue
        if on_run.variant != off_run.variant or on_run.compiled.failure or off_run.compiled.failure:
            continue
        if differ(off_run.compiled, on_run.compiled):
            break
        kind = on_run.variant["kind"]
        if on_run.recompiled != off_run.recompiled:
            out.append(Verdict(NAME, Status.FAIL, kind="dedup_guards", where=f"variant {kind}",
                               message=f"changing {on_run.variant['description']} recompiles with deduplication "
                                       f"{'on' if on_run.recompiled else 'off'} only",
                               details={**_details(on_run, f"dedup_recompile:{kind}"),
                                        "off_reasons": off_run.recompile_reasons}))
            continue
        extra, missing = guard_difference(on_run.new_guards, off_run.new_guards)
        if extra or missing:
            out.append(Verdict(NAME, Status.FAIL, kind="dedup_guards", where=f"variant {kind}",
                               message=f"after changing {on_run.variant['description']}, the new entry's guards "
                                       f"differ with deduplication: extra {extra[:5]}, missing {missing[:5]}",
                               details={**_details(on_run, f"dedup_guards:{kind}"), "extra": extra, "missing": missing}))
    return out


def judged_runs(outcome: Outcome) -> tuple[list[VariantRun], str]:
    """The changed calls the guard oracles judge, and with deduplication "on"
    or "off": when the first compile with deduplication crashes (another
    oracle's finding), the guards are still checked on the companion run
    without it."""
    if outcome.compiled.failure is None:
        return _ran(outcome.capture.variants), "on"
    off = outcome.companions.get("dedup_off")
    if off is not None and off[0].failure is None:
        return _ran(off[1].variants), "off"
    return [], ""


def _not_run(outcome: Outcome, name: str) -> Verdict | None:
    if not outcome.config.variants:
        return Verdict(name, Status.INCONCLUSIVE, kind="not_run", message="the run re-called nothing")
    runs, mode = judged_runs(outcome)
    if not mode:
        return Verdict(name, Status.INCONCLUSIVE, kind="crash", message="the first call crashed: nothing to re-call")
    if not runs:
        return Verdict(name, Status.INCONCLUSIVE, kind="no_variants", message="no change could be run in eager")
    return None


def _first_call(outcome: Outcome, mode: str):  # type: ignore[no-untyped-def]
    return (outcome.compiled, outcome.capture) if mode == "on" else outcome.companions["dedup_off"]


def each_call(outcome: Outcome) -> dict[str, Verdict]:
    """Each changed call's own verdict by its kind (``check`` keeps the first
    failure): a model check reports its modes apart, so a crash after one
    change does not hide how the others did."""
    runs, mode = judged_runs(outcome)
    matched = tensor_matched(_first_call(outcome, mode)[1]) if mode else frozenset()
    return {r.variant["kind"]: _judge_call(r, _floor(outcome, r), matched, outcome.program) for r in runs}


def check(outcome: Outcome) -> Verdict:
    skipped = _not_run(outcome, NAME)
    if skipped is not None:
        return skipped
    runs, mode = judged_runs(outcome)
    first, _ = _first_call(outcome, mode)
    wrong = [v for v in compare_runs(NAME, outcome.eager, first, outcome.reference, **numerics(outcome))
             if v.status is not Status.PASS]
    if nondeterministic(outcome.eager, outcome.eager_again) or wrong or outcome.eager.treespec != first.treespec:
        # Every later call would repeat that failure: it is the differential
        # (or dedup_toggle) oracle's finding, and no guard can be blamed for it.
        return Verdict(NAME, Status.INCONCLUSIVE, kind="first_call_wrong",
                       message=f"the first call (deduplication {mode}) is not right or eager is unstable")
    matched = tensor_matched(_first_call(outcome, mode)[1])
    verdicts = [_judge_call(r, _floor(outcome, r), matched, outcome.program) for r in runs]
    verdicts += [_over_accepting(outcome, r) for r in runs if r.reverse is not None]
    if mode == "on":
        verdicts += _against_dedup_off(outcome)
    result = combine(NAME, verdicts)
    if result.status is Status.PASS:
        kinds = ", ".join(r.variant["kind"] for r in runs)
        return Verdict(NAME, Status.PASS, message=f"{len(runs)} changed calls right, deduplication {mode} ({kinds})")
    return result


def _over_accepting(outcome: Outcome, run: VariantRun) -> Verdict:
    """An entry a change's recompile added also accepts the call without the change (harness.recall.run_reverse):
    its code, run on that call, must compute what eager does there, or Dynamo would serve a wrong result
    wherever it tried that entry first (its cache order is its own)."""
    reverse = run.reverse
    if reverse.failure is not None:  # an entry that cannot run the call it accepts: no judgment of values
        return Verdict(NAME, Status.PASS)
    wrong = [v for v in compare_runs(NAME, outcome.eager, reverse, outcome.reference, **numerics(outcome)) if v.failed]
    if not wrong:
        return Verdict(NAME, Status.PASS)
    v, kind = wrong[0], run.variant["kind"]
    return Verdict(NAME, Status.FAIL, kind="over_accepting", where=v.where,
                   message=f"the entry compiled after changing {run.variant['description']} also accepts the call "
                           f"without that change, and computes a wrong result for it: {v.kind} at {v.where} "
                           f"({v.message})", details={**_details(run, f"over_accepting:{kind}"), **v.details})


def _traced(reason: str) -> bool:
    """A guard on the length of the program's autograd trace (generators.autograd: hooks traced into the
    forward append to it; a recompile mid-forward guards on how much the call recorded so far): the
    harness's own record, not the program's meaning."""
    return TRACE in reason


def _data_dependent(reason: str) -> bool:
    """A guard on a Python scalar computed from tensor data and handed across
    a graph break (``h.mean().item()``), or on the size of a tensor whose size
    the data decides (``masked_select``) handed across one: Dynamo specializes
    it on the first compile and makes it dynamic when it changes (automatic
    dynamic), so new tensor values explain this recompile."""
    return "___stack" in reason


def _other_state(reason: str) -> bool:
    """An entry compiled for another global state (the grad mode or default
    dtype a repeat of the program sets): it could never serve this call."""
    return ": GLOBAL_STATE changed:" in reason


def _explained_by_data(reasons: list[str]) -> bool:
    """Every entry that could serve the call failed on a data-dependent guard, or on the length of the
    harness's autograd trace (the others were compiled under another global state)."""
    own = [r for r in reasons if not _other_state(r)]
    return not reasons or bool(own) and all(_data_dependent(r) or _traced(r) for r in own)


def check_recompiles(outcome: Outcome) -> Verdict:
    skipped = _not_run(outcome, RECOMPILES)
    if skipped is not None:
        return skipped
    runs, mode = judged_runs(outcome)
    _, capture = _first_call(outcome, mode)
    if capture.original_accepts_original is False:
        return Verdict(RECOMPILES, Status.FAIL, kind="recompile", where="the first call again",
                       message="the cache entry compiled for the first call rejects the same call: "
                               + "; ".join(capture.original_rejects_because)[:300],
                       details={"label": "recompile:rejects_original",
                                "failing_guards": capture.original_rejects_because})
    for run in runs:
        if run.variant["neutral"] and run.recompiled and run.compiled.failure is None \
                and not run.variant.get("explained") and not _explained_by_data(run.recompile_reasons):
            kind = run.variant["kind"]
            reason = (run.recompile_reasons or ["(no reason recorded)"])[-1]  # the oldest entry's
            return Verdict(RECOMPILES, Status.FAIL, kind="recompile", where=f"variant {kind}",
                           message=f"{run.variant['description']} cannot change the result, yet it recompiled: "
                                   f"{reason.splitlines()[0]}",
                           details=_details(run, f"recompile:{kind}"))
    return Verdict(RECOMPILES, Status.PASS, message="no change that keeps the meaning recompiled")
