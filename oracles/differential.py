"""Differential oracle: compiled outputs and gradients against eager.

Float64 eager is the referee for numerical noise; a rerun of eager is the
nondeterminism gate; a crash of the compiled program is a finding of its own
kind ("crash"), kept apart from wrong results.
"""

from __future__ import annotations

import re

import torch

from generators.autograd import FEATURES as AUTOGRAD
from generators.check import aliases_outside_schema, lowest_precision, zero_signs_determined
from harness.outcome import Execution, Outcome

from .compare import Difference, bitwise_equal, compare
from .tolerance import backend_floor
from .verdict import Status, Verdict, combine

NAME = "differential"


def _pairs(run: Execution | None) -> dict[str, object]:
    if run is None:
        return {}
    values = {f"output[{i}]": v for i, v in enumerate(run.outputs)}
    values.update({f"state[{k}]": v for k, v in run.state.items()})
    values.update({f"grad[{k}]": v for k, v in run.grads.items()})
    return values


def nondeterministic(a: Execution, b: Execution) -> list[str]:
    pa, pb = _pairs(a), _pairs(b)
    return [k for k in pa if k not in pb or not bitwise_equal(pa[k], pb[k])]


def check(outcome: Outcome) -> Verdict:
    eager, compiled = outcome.eager, outcome.compiled
    if compiled.failure is not None:
        f = compiled.failure
        if unsupported(outcome.config, f) or refused(outcome.program, f):
            # the backend said it does not know an op, or torch documents that it refuses what a program's
            # autograd feature asks (double backward through AOTAutograd): counted apart, never a crash finding
            return Verdict(NAME, Status.INCONCLUSIVE, kind="unsupported", where=f.stage, message=f"{f.type}: {f.message}")
        return Verdict(
            NAME, Status.FAIL, kind="crash", where=f.stage,
            message=f"{f.type}: {f.message}",
            details={"stage": f.stage, "type": f.type, "traceback": f.traceback},
        )
    unstable = nondeterministic(eager, outcome.eager_again)
    if unstable:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", where=unstable[0],
                       message="eager disagrees with itself; numerics not compared")
    if eager.treespec != compiled.treespec or len(eager.outputs) != len(compiled.outputs):
        return Verdict(NAME, Status.FAIL, kind="structure", where="outputs",
                       message=f"expected output structure {eager.treespec}, got {compiled.treespec}")

    return combine(NAME, [*aliasing(NAME, eager, compiled, outcome.program), *versions(NAME, eager, compiled),
                          *compare_runs(NAME, eager, compiled, outcome.reference, **numerics(outcome),
                                        requires_grad=outcome.config.mode == "train", noise=outcome.low_reference)])


def aliasing(oracle: str, expected: Execution, actual: Execution, program=None) -> list[Verdict]:
    """An output that shares storage with an input or another output in one run and not in the
    other: a write through it changes what it changes in eager, or what it does not. Not judged
    for a program with an op whose eager kernel may alias outside its schema (OpSpec.eager_alias)."""
    if not expected.aliases or len(expected.aliases) != len(actual.aliases):
        return []
    if program is not None and aliases_outside_schema(program):
        return []
    return [Verdict(oracle, Status.FAIL, kind="aliasing", where=f"output[{i}]",
                    message=f"expected it to share storage with {e or 'nothing'}, it shares it with {a or 'nothing'}",
                    details={"expected": e, "actual": a})
            for i, (e, a) in enumerate(zip(expected.aliases, actual.aliases)) if e != a]


def versions(oracle: str, expected: Execution, actual: Execution) -> list[Verdict]:
    """An input, buffer or parameter whose version counter eager's forward moved and the compiled one did not.
    Autograd reads the counter to refuse a backward through a graph that saved the tensor before it was written
    (what ``torch.autograd.graph.increment_version`` is for: a compiled kernel that writes an input in place must
    call it); a write it does not see gives that backward silently wrong gradients. A compiled run that moves a
    counter eager leaves alone is not judged: eager's own kernels write without moving it (``batch_norm``'s
    running statistics), and torch documents extra moves as harmless."""
    if expected.written is None or actual.written is None:
        return []
    return [Verdict(oracle, Status.FAIL, kind="version", where=f"state[{name}]",
                    message=f"eager's forward wrote {name} and moved its version counter; the compiled forward did "
                            "not move it: a backward through a graph that saved it would not see the write",
                    details={"expected": True, "actual": False})
            for name in sorted(set(expected.written) - set(actual.written))]


# A compile-time rejection of an op the backend does not know, by a backend
# that rejects rather than falls back (harness.backend_capabilities).
UNSUPPORTED = re.compile(r"NotImplementedError|[Nn]ot (?:yet )?(?:supported|implemented)|[Uu]nsupported")


def unsupported(config, failure) -> bool:
    """``failure`` is a rejection of an op by a backend that rejects ops it does not know."""
    return config.rejects and failure.stage == "backend_compile" and bool(
        UNSUPPORTED.search(f"{failure.type}: {failure.message}"))


def refused(program, failure) -> bool:
    """``failure`` is a refusal torch documents for one of the program's autograd features
    (generators.autograd: ``Feature.refusals``)."""
    names = program.options.autograd if program is not None else ()
    return any(re.search(pattern, failure.message) for n in names for pattern in AUTOGRAD[n].refusals)


def numerics(outcome: Outcome) -> dict:
    """How values of this program are judged: its precision floor, and
    whether the sign of a zero is the program's to decide (see compare)."""
    if outcome.numerics is not None:  # a model (harness.model): no program to ask
        return {"floor": getattr(torch, outcome.numerics["floor"]), "signed_zeros": outcome.numerics["signed_zeros"]}
    return program_numerics(outcome.program, outcome.config)


def program_numerics(program, config) -> dict:
    """How a program's values are judged on a run of ``config``: the least
    precise dtype it computes in (generators.check), or the backend does where
    it computes lower (RunConfig.precision); and whether zero signs are its own."""
    return {"floor": getattr(torch, backend_floor(lowest_precision(program), config.precision)),
            "signed_zeros": zero_signs_determined(program)}


def compare_runs(oracle: str, expected: Execution, actual: Execution, reference: Execution | None,
                 exact: tuple[str, ...] = (), floor: torch.dtype | None = None,
                 signed_zeros: bool = True, requires_grad: bool = True,
                 noise: Execution | None = None) -> list[Verdict]:
    """One verdict per value (outputs, state, gradients) of two runs of one
    program. Values whose kind is in ``exact`` ("output", "state", "grad")
    must agree bitwise; the others are judged by ``compare``. ``requires_grad``
    False: a forward-only run (an inference-only backend) need not carry autograd."""
    verdicts = []
    for i, (rg_e, rg_c) in enumerate(zip(expected.requires_grad, actual.requires_grad) if requires_grad else ()):
        if rg_e != rg_c:
            verdicts.append(Verdict(oracle, Status.FAIL, kind="requires_grad", where=f"output[{i}]",
                                    message=f"expected requires_grad={rg_e}, got {rg_c}"))
    exp, act, ref, low = _pairs(expected), _pairs(actual), _pairs(reference), _pairs(noise)
    for where in sorted(exp.keys() | act.keys(), key=_order):
        diff = compare(exp.get(where), act.get(where), ref.get(where), floor, signed_zeros,
                       _cast_back(low.get(where), exp.get(where)))
        if where.split("[")[0] in exact and (diff is None or diff.kind == "mismatch" or diff.inconclusive):
            # Bitwise agreement settles what the tolerance cannot (an edge
            # value without a referee); anything less is a failure here.
            same = bitwise_equal(exp.get(where), act.get(where))
            diff = None if same else _not_bitwise(exp[where], act[where])
        if diff is None:
            verdicts.append(Verdict(oracle, Status.PASS, where=where))
            continue
        kind = {"missing": "missing_grad", "unexpected": "unexpected_grad"}.get(diff.kind, diff.kind) if where.startswith("grad") else diff.kind
        if kind == "unexpected_grad" and isinstance(act.get(where), torch.Tensor) and not bool(act[where].ne(0).any()):
            kind = "zero_grad"  # a gradient of zeros where eager has none (autograd materialized it): its own class
        status = Status.INCONCLUSIVE if diff.inconclusive else Status.FAIL
        verdicts.append(Verdict(oracle, status, kind=kind, where=where, message=diff.message, details=diff.details))
    if not verdicts:
        verdicts.append(Verdict(oracle, Status.PASS, message="no values to compare"))
    return verdicts


def _cast_back(low, like):
    """A value of the low-precision run in the dtype of the value it stands beside."""
    if isinstance(low, torch.Tensor) and isinstance(like, torch.Tensor) and low.is_floating_point() \
            and like.is_floating_point():
        return low.to(like.dtype)
    return None


def _not_bitwise(a: object, b: object) -> Difference:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype:
        worst = (a.double() - b.double()).abs().nan_to_num(float("inf")).max().item() if a.numel() else 0.0
        return Difference("mismatch", f"not bitwise equal (max abs difference {worst:.3g}; "
                                      "a NaN or a zero's sign counts)", {"max_abs": worst})
    return Difference("mismatch", f"expected {a!r}, got {b!r}")


def _order(where: str) -> tuple[int, str]:
    return ({"output": 0, "state": 1}.get(where.split("[")[0], 2), where)
