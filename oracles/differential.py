"""Differential oracle: compiled outputs and gradients against eager.

Float64 eager is the referee for numerical noise; a rerun of eager is the
nondeterminism gate; a crash of the compiled program is a finding of its own
kind ("crash"), kept apart from wrong results.
"""

from __future__ import annotations

from harness.outcome import Execution, Outcome

from .compare import bitwise_equal, compare
from .verdict import Status, Verdict, combine

NAME = "differential"


def _pairs(run: Execution | None) -> dict[str, object]:
    if run is None:
        return {}
    values = {f"output[{i}]": v for i, v in enumerate(run.outputs)}
    values.update({f"state[{k}]": v for k, v in run.state.items()})
    values.update({f"grad[{k}]": v for k, v in run.grads.items()})
    return values


def _nondeterministic(a: Execution, b: Execution) -> list[str]:
    pa, pb = _pairs(a), _pairs(b)
    return [k for k in pa if k not in pb or not bitwise_equal(pa[k], pb[k])]


def check(outcome: Outcome) -> Verdict:
    eager, compiled = outcome.eager, outcome.compiled
    if compiled.failure is not None:
        f = compiled.failure
        return Verdict(
            NAME, Status.FAIL, kind="crash", where=f.stage,
            message=f"{f.type}: {f.message}",
            details={"stage": f.stage, "type": f.type, "traceback": f.traceback},
        )
    unstable = _nondeterministic(eager, outcome.eager_again)
    if unstable:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", where=unstable[0],
                       message="eager disagrees with itself; numerics not compared")
    if eager.treespec != compiled.treespec or len(eager.outputs) != len(compiled.outputs):
        return Verdict(NAME, Status.FAIL, kind="structure", where="outputs",
                       message=f"expected output structure {eager.treespec}, got {compiled.treespec}")

    verdicts = []
    for i, (rg_e, rg_c) in enumerate(zip(eager.requires_grad, compiled.requires_grad)):
        if rg_e != rg_c:
            verdicts.append(Verdict(NAME, Status.FAIL, kind="requires_grad", where=f"output[{i}]",
                                    message=f"expected requires_grad={rg_e}, got {rg_c}"))
    expected, actual, reference = _pairs(eager), _pairs(compiled), _pairs(outcome.reference)
    for where in sorted(expected.keys() | actual.keys(), key=_order):
        diff = compare(expected.get(where), actual.get(where), reference.get(where))
        if diff is None:
            verdicts.append(Verdict(NAME, Status.PASS, where=where))
            continue
        kind = {"missing": "missing_grad", "unexpected": "unexpected_grad"}.get(diff.kind, diff.kind) if where.startswith("grad") else diff.kind
        status = Status.INCONCLUSIVE if diff.inconclusive else Status.FAIL
        verdicts.append(Verdict(NAME, status, kind=kind, where=where, message=diff.message, details=diff.details))
    if not verdicts:
        return Verdict(NAME, Status.PASS, message="no values to compare")
    return combine(NAME, verdicts)


def _order(where: str) -> tuple[int, str]:
    return ({"output": 0, "state": 1}.get(where.split("[")[0], 2), where)
