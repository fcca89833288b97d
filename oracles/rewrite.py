"""Semantic equivalence of the rewrite: the Dynamo graph before and after the
deduplication pass, both run eagerly on copies of the same inputs.

No backend is involved, so a failure here is the pass's alone. Forward
outputs and mutated inputs must agree bitwise (the same aten ops run in the
same order); gradients within tolerance, since autograd may accumulate the
contributions of a value used in several places in another order (in a
program computing in bfloat16 or float16, within a few units in the last
place of the gradient's largest element: there is no float64 run of the graphs
here). Where contributions cancel, a gradient is far smaller than what was summed
and that bound too tight (seed 97: 0.8125 for 0.777 in bfloat16, one float32 ulp
in float32): a 16-bit gradient past it is noise when the program's compiled
gradients, the pass in them, stand within the float64 referee's bounds of
eager's (the differential oracle's comparison).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch

from harness.outcome import Outcome

from .differential import compare_runs, nondeterministic, numerics
from .verdict import Status, Verdict, combine

NAME = "rewrite"


# Gradient contributions summed in another order differ by a few units in the
# last place of the largest of them: with no float64 run of the graphs to
# referee, that much is noise in a program computing in a 16-bit float.
NOISE_ULPS = 4


def _summation_noise(a, b, floor: torch.dtype) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape \
            or floor not in (torch.bfloat16, torch.float16) or not a.numel():
        return False
    scale = a.detach().double().abs().max().item()
    worst = (a.detach().double() - b.detach().double()).abs().max().item()
    return worst <= NOISE_ULPS * torch.finfo(floor).eps * scale


def _refereed(outcome: Outcome, floor: torch.dtype) -> bool:
    """In a 16-bit program, whether every gradient of the compiled run (the rewritten graphs in it) stands within
    the float64 referee's bounds of eager's."""
    if floor not in (torch.bfloat16, torch.float16) or outcome.reference is None \
            or outcome.eager.failure is not None or outcome.compiled.failure is not None:
        return False
    grads = [v for v in compare_runs(NAME, outcome.eager, outcome.compiled, outcome.reference, **numerics(outcome))
             if v.where.startswith("grad[")]
    return bool(grads) and not any(v.failed or v.status is Status.INCONCLUSIVE for v in grads)


def check(outcome: Outcome) -> Verdict:
    checked = 0
    verdicts = []
    refereed = functools.cache(lambda floor: _refereed(outcome, floor))  # once a check, where a gradient needs it
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
        num = numerics(outcome)
        floor = num["floor"]
        for v in compare_runs(NAME, pre, post, None, exact=("output", "state"), **num):
            if v.failed and v.kind == "mismatch" and v.where.startswith("grad[") and (
                    _summation_noise(pre.grads.get(v.where[5:-1]), post.grads.get(v.where[5:-1]), floor)
                    or refereed(floor)):
                v = Verdict(NAME, Status.PASS, where=v.where)
            details = {**(v.details or {}), "gradient": v.where.startswith("grad[")} if v.failed else v.details
            verdicts.append(Verdict(v.oracle, v.status, v.kind, f"{where}.{v.where}" if v.where else where,
                                    v.message, details))
    if not verdicts:
        return Verdict(NAME, Status.PASS, message="no graph was rewritten")
    return combine(NAME, verdicts)
