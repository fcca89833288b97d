"""Door oracle: a program reached through another door (``generators.doors``)
must compute, compiled, what it computes in eager through the same door.

Each call of a ``harness.doors`` run is judged as the differential oracle
judges one run (float64 referee, eager-twice nondeterminism gate, the same
tolerances). Where eager is a door operator's plain-Python equivalent, the
operator's own eager run must agree with it too (a bug in torch's eager
path of that operator, kept apart). A warm compile must compute bitwise
what the cold one did; ``check_cache`` holds it to hitting the caches the
cold one filled. A door that does not carry a program (refused) or a torch
without it is counted, never judged.
"""

from __future__ import annotations

import torch

from harness.doors import DoorOutcome
from harness.outcome import Execution

from .compare import bitwise_equal
from .differential import _pairs, compare_runs, nondeterministic, program_numerics, refused, unsupported
from .verdict import Status, Verdict, combine

NAME = "door"
CACHE = "door_cache"


def _crash(run: DoorOutcome, label: str, f) -> Verdict:
    if unsupported(run.config, f) or refused(run.program, f):  # as the differential oracle
        return Verdict(NAME, Status.INCONCLUSIVE, kind="unsupported", where=f"{run.door}:{label}:{f.stage}",
                       message=f"{f.type}: {f.message}", details={"door": run.door})
    return Verdict(NAME, Status.FAIL, kind="crash", where=f"{run.door}:{label}:{f.stage}",
                   message=f"{f.type}: {f.message}",
                   details={"door": run.door, "call": label, "stage": f.stage, "type": f.type,
                            "traceback": f.traceback})


def _zeros(actual: Execution | None, where: str) -> bool:
    value = _pairs(actual).get(where) if actual is not None else None
    return isinstance(value, torch.Tensor) and not bool(value.ne(0).any())


def _values(run: DoorOutcome, label: str, verdicts: list[Verdict], role: str = "",
            actual: Execution | None = None) -> list[Verdict]:
    out = []
    for v in verdicts:
        where = ":".join(p for p in (run.door, label, role, v.where) if p)
        kind = v.kind or ""
        if kind == "unexpected_grad" and _zeros(actual, v.where):
            kind = "zero_grad"  # a gradient of zeros where eager has none: a class of its own
        out.append(Verdict(NAME, v.status, kind=kind, where=where, message=v.message,
                           details={**v.details, "door": run.door, "call": label, "value": v.where,
                                    **({"role": role} if role else {})}))
    return out


def verdicts(run: DoorOutcome) -> list[Verdict]:
    if run.refused:
        return [Verdict(NAME, Status.INCONCLUSIVE, kind="refused", where=run.door, message=run.refused,
                        details={"door": run.door})]
    floor = program_numerics(run.program, run.config)
    out: list[Verdict] = []
    for call in run.calls:
        if call.compiled is None:
            continue  # an earlier call crashed: judged there
        if call.compiled.failure is not None:
            return out + [_crash(run, call.label, call.compiled.failure)]
        unstable = nondeterministic(call.eager, call.eager_again)
        if unstable:
            return out + [Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic",
                                  where=f"{run.door}:{call.label}:{unstable[0]}",
                                  message="eager through the door disagrees with itself; numerics not compared",
                                  details={"door": run.door})]
        if call.door_eager is not None:
            out += _values(run, call.label, _structure(call.eager, call.door_eager)
                           or compare_runs(NAME, call.eager, call.door_eager, call.reference, **floor), "eager_operator",
                           call.door_eager)
        out += _values(run, call.label, _structure(call.eager, call.compiled)
                       or compare_runs(NAME, call.eager, call.compiled, call.reference, **floor), actual=call.compiled)
        if call.cold is not None and call.cold.failure is None and call.cold is not call.compiled:
            out += _values(run, call.label, _exact(call.cold, call.compiled), "warm_vs_cold")
    return out or [Verdict(NAME, Status.PASS, message="nothing was compiled through the door",
                           details={"door": run.door})]


def _structure(expected: Execution, actual: Execution) -> list[Verdict]:
    if expected.treespec != actual.treespec or len(expected.outputs) != len(actual.outputs):
        return [Verdict(NAME, Status.FAIL, kind="structure", where="outputs",
                        message=f"expected output structure {expected.treespec}, got {actual.treespec}")]
    return []


def _exact(cold: Execution, warm: Execution) -> list[Verdict]:
    """A cache serves what it stored: the warm run's values are the cold run's, bit for bit."""
    a, b = _pairs(cold), _pairs(warm)
    out = []
    for where in sorted(a.keys() | b.keys()):
        same = where in a and where in b and bitwise_equal(a[where], b[where])
        out.append(Verdict(NAME, Status.PASS if same else Status.FAIL, kind="" if same else "cache_differs",
                           where=where, message="" if same else "the warm compile differs from the cold one"))
    return out


def check(run: DoorOutcome) -> Verdict:
    return combine(NAME, verdicts(run))


def stored(counts: dict) -> dict[str, int]:
    """What a compile wrote to each cache, as torch counts it: the AOTAutograd
    cache's saves; the FX graph cache's misses that it neither bypassed nor
    failed to pickle or write."""
    fx = counts["fxgraph_cache_miss"] - counts["fxgraph_cache_pickle_error"] - counts["fxgraph_cache_write_error"]
    return {"fxgraph_cache": fx if not counts["fxgraph_cache_bypass"] else 0,
            "autograd_cache": counts["autograd_cache_saved"]}


def check_cache(run: DoorOutcome) -> Verdict:
    """A warm compile hits every entry the cold one stored (the same program,
    the same graphs: the same keys)."""
    cold, warm = run.facts.get("cold"), run.facts.get("warm")
    if run.refused or cold is None or warm is None:
        return Verdict(CACHE, Status.INCONCLUSIVE, kind="not_run", where=run.door,
                       message=run.refused or "no warm compile", details={"door": run.door})
    missed = [f"{cache}: the cold compile stored {n}, the warm one hit {warm[f'{cache}_hit']}"
              for cache, n in stored(cold).items() if n and warm[f"{cache}_hit"] < n]
    if missed:
        return Verdict(CACHE, Status.FAIL, kind="no_hit", where=f"{run.door}:{missed[0].split(':')[0]}",
                       message="; ".join(missed), details={"door": run.door, "cold": cold, "warm": warm})
    return Verdict(CACHE, Status.PASS, where=run.door, details={"cold": cold, "warm": warm})
