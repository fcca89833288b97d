"""Semantic equivalence of the rewrite: the Dynamo graph before and after the
deduplication pass, both run eagerly on copies of the same inputs.

No backend is involved, so a failure here is the pass's alone. Forward
outputs and mutated inputs must agree bitwise (the same aten ops run in the
same order); gradients within tolerance, since autograd may accumulate the
contributions of a value used in several places in another order.
"""

from __future__ import annotations

from dataclasses import replace

from harness.outcome import Outcome

from .differential import nondeterministic, compare_runs
from .verdict import Status, Verdict, combine

NAME = "rewrite"


def check(outcome: Outcome) -> Verdict:
    checked = 0
    verdicts = []
    for g_index, record in enumerate(outcome.capture.structure):
        if record.rewrite is None:
            continue
        pre, pre_again, post = record.rewrite
        where = f"graph[{g_index}]"
        if pre.failure is not None:
            verdicts.append(Verdict(NAME, Status.INCONCLUSIVE, kind="pre_graph_fails", where=where,
                                    message=f"the graph before the pass does not run: {pre.failure.type}: {pre.failure.message}"))
            continue
        if nondeterministic(pre, pre_again):
            verdicts.append(Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", where=where,
                                    message="the graph before the pass disagrees with itself"))
            continue
        if post.failure is not None:
            f = post.failure
            verdicts.append(Verdict(NAME, Status.FAIL, kind="crash", where=f"{where}:{f.stage}",
                                    message=f"the rewritten graph fails where the original runs: {f.type}: {f.message}",
                                    details={"stage": f.stage, "type": f.type, "traceback": f.traceback}))
            continue
        checked += 1
        # An input the pass left unused is dropped from the graph's signature:
        # compare the inputs both graphs take.
        shared = pre.state.keys() & post.state.keys()
        pre = replace(pre, state={k: v for k, v in pre.state.items() if k in shared},
                      grads={k: v for k, v in pre.grads.items() if k in post.grads or k in shared})
        for v in compare_runs(NAME, pre, post, None, exact=("output", "state")):
            verdicts.append(Verdict(v.oracle, v.status, v.kind, f"{where}.{v.where}" if v.where else where,
                                    v.message, v.details))
    if not verdicts:
        return Verdict(NAME, Status.PASS, message="no graph was rewritten")
    return combine(NAME, verdicts)
