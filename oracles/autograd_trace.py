"""Autograd-trace oracle: the hooks and pack/unpack calls of the compiled run against eager's.

A program's autograd features (generators.autograd) record every hook call as ``(label, value)``;
``harness.execute`` keeps them with the phase they ran in. Judged only as far as torch promises
(``generators.autograd.PROMISES``): forward records (module hooks run in program order) in eager's
order; backward records matched per label whatever their order (the engine orders independent
branches as it likes, and a compiled backward is one node), each value against eager's within the
float64 referee's tolerance; packs and unpacks not at all (what is saved is the partitioner's choice,
and code no gradient needs is dropped: a hook applied on one side shows in the gradients instead);
pre-hooks before their hooks (``ORDERED``). A difference is a kind of its own: ``hook:missing``,
``hook:extra``, ``hook:unreached`` (a backward hook eager never calls, called with no gradient: its tensor
reaches no loss but sits on a compiled node that runs; ``hook:zeros``: called with gradients of zeros),
``hook:value``, ``hook:order``, ``error:missing`` (eager raised for
a saved tensor written in place, compiled code did not), ``grad:value`` (a first gradient of a
double backward). And eager itself against the same program without its features, where torch
promises how the values relate (``transparent``): what eager and the compiled run share cannot be
seen by comparing them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import torch

from generators.autograd import ORDERED, grads_wrapped, plain_values, promise, zero_grads
from harness.outcome import Execution, Outcome

from .compare import compare
from .differential import compare_runs, nondeterministic, numerics
from .verdict import Status, Verdict, combine

NAME = "autograd_trace"


def _labels(run: Execution, phase: str) -> list[str]:
    """The labels of ``phase`` whose every call torch promises ("each"; the others are judged by count)."""
    return [label for p, label, _ in run.trace if p == phase and promise(label)[0] == "each"]


def _values(run: Execution | None, phase: str, label: str) -> list:
    return [] if run is None else [v for p, lab, v in run.trace if p == phase and lab == label]


def check(outcome: Outcome) -> Verdict:
    return combine(NAME, [*_plain(outcome), _traced(outcome)])


def _plain(outcome: Outcome) -> list[Verdict]:
    """Eager with the program's autograd features against eager without them (``Outcome.plain_eager``), as torch
    promises they relate (``generators.autograd.plain_values``): hooks that only observe, lossless pack/unpack
    pairs and gradients asked for another way leave the values alone. The compiled run is judged against eager
    with the features; a fault in torch's autograd machinery that both share shows here alone."""
    plain, eager, program = outcome.plain_eager, outcome.eager, outcome.program
    relation = plain_values(program.options.autograd) if plain is not None and program is not None else ""
    if not relation or eager.failure is not None or plain.failure is not None \
            or (outcome.eager_again is not None and nondeterministic(eager, outcome.eager_again)):
        return []
    wrapped, zeros = grads_wrapped(program.options.autograd), zero_grads(program.options.autograd)
    expected = _related(plain, relation, eager, wrapped, zeros)
    reference = _related(outcome.plain_reference, relation, eager, wrapped, zeros)
    verdicts = compare_runs(NAME, expected, eager, reference, **numerics(outcome),
                            requires_grad=outcome.config.mode == "train")
    features = ", ".join(program.options.autograd)
    return [dataclasses.replace(v, kind="transparent", message=(
                f"eager with {features} differs from eager without ({relation}: torch promises they do not change "
                f"it): {v.kind}: {v.message}")) for v in verdicts if v.status is Status.FAIL]


def _as_eager(value, like, plain_class_too: bool = False):
    """``value`` as eager's class ``like`` has: the program without its features is a source of its own, so a
    tensor subclass it defines is a class of its own, taken as eager's class of that name; ``plain_class_too``:
    a plain tensor too (gradients torch.autograd.grad wraps in a leaf's subclass: Feature.grads_wrapped)."""
    if not (isinstance(value, torch.Tensor) and isinstance(like, torch.Tensor)) or type(value) is type(like):
        return value
    if type(value).__qualname__ == type(like).__qualname__ or (plain_class_too and type(value) is torch.Tensor):
        return value.as_subclass(type(like))
    return value


def _zeros_for_none(value, like, zeros: bool):
    """A gradient of zeros where eager's is exactly that and the run without the features has none, when the features
    route inputs through full backward hooks (Feature.zero_grads); ``value`` otherwise."""
    if zeros and value is None and isinstance(like, torch.Tensor) and not like.any():
        return torch.zeros_like(like)
    return value


def _related(plain: Execution | None, relation: str, eager: Execution, wrapped: bool = False,
             zeros: bool = False) -> Execution | None:
    """What eager with the features should give, from the run without them (``_as_eager``: its classes)."""
    if plain is None:
        return None
    outputs = [_as_eager(p, e) for p, e in zip(plain.outputs, eager.outputs)]
    outputs += plain.outputs[len(outputs):]
    grads = {k: _zeros_for_none(_as_eager(g, eager.grads.get(k), wrapped), eager.grads.get(k), zeros)
             for k, g in plain.grads.items()}
    if relation == "twice":
        grads = {k: None if g is None else g * 2 for k, g in grads.items()}
    elif relation == "subset":  # the drive asks for every other leaf: inputs needing a gradient, then parameters
        asked = list(grads)[::2]
        grads = {k: g if k in asked else None for k, g in grads.items()}
    return dataclasses.replace(plain, outputs=outputs, grads=grads, trace=[])


def _traced(outcome: Outcome) -> Verdict:
    eager, compiled = outcome.eager, outcome.compiled
    if not eager.trace and not compiled.trace:
        return Verdict(NAME, Status.PASS, message="no autograd trace")
    if compiled.failure is not None:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="crash", message="the compiled run failed (the differential "
                                                                         "oracle judges the crash)")
    again = outcome.eager_again
    if again is not None and [(p, lab) for p, lab, _ in again.trace] != [(p, lab) for p, lab, _ in eager.trace]:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", message="eager's trace differs from itself")
    verdicts = _counted(eager, compiled) + _forward(outcome) + _backward(outcome) + _order(eager, compiled)
    return combine(NAME, verdicts or [Verdict(NAME, Status.PASS)])


def _forward(outcome: Outcome) -> list[Verdict]:
    """Forward records run in program order: the same labels in the same order, each value alike."""
    e, c = _labels(outcome.eager, "forward"), _labels(outcome.compiled, "forward")
    if e != c:
        missing, extra = Counter(e) - Counter(c), Counter(c) - Counter(e)
        if missing or extra:
            label = next(iter(missing or extra))
            what = "missing" if missing else "extra"
            return [Verdict(NAME, Status.FAIL, kind=f"{promise(label)[1]}:{what}", where=label,
                            message=f"forward: expected {e}, got {c}")]
        return [Verdict(NAME, Status.FAIL, kind="hook:order", where=c[0] if c else "",
                        message=f"forward hooks ran in another order: expected {e}, got {c}")]
    out = []
    for label in dict.fromkeys(e):
        out += _matched(outcome, "forward", label, ordered=True)
    return out


def _counted(eager: Execution, compiled: Execution) -> list[Verdict]:
    """Records judged by count alone, in whichever phase they ran: "once" (mode="any": as many calls)."""
    e = Counter(label for _, label, _ in eager.trace if promise(label)[0] == "once")
    c = Counter(label for _, label, _ in compiled.trace if promise(label)[0] == "once")
    return [Verdict(NAME, Status.FAIL, kind=f"{promise(label)[1]}:{'missing' if e[label] > c[label] else 'extra'}",
                    where=label, message=f"called {e[label]} times in eager, {c[label]} in the compiled run")
            for label in sorted(e.keys() | c.keys()) if e[label] != c[label]]


def _backward(outcome: Outcome) -> list[Verdict]:
    e, c = Counter(_labels(outcome.eager, "backward")), Counter(_labels(outcome.compiled, "backward"))
    out = []
    for label in sorted(e.keys() | c.keys()):
        kind = promise(label)[1]
        if e[label] != c[label]:
            what = "missing" if e[label] > c[label] else "extra"
            values = _values(outcome.compiled, "backward", label)
            if not e[label] and all(v is None for v in values):
                # a hook eager never calls, called with no gradient: the tensor reaches no loss, but it is an
                # output of a compiled node that runs (one node for the graph): a class of its own
                what = "unreached"
            elif not e[label] and all(_zeros(v) for v in values):
                # ... called with gradients of zeros: the compiled node made its unused output's gradient zeros
                # where eager's engine leaves it undefined (gradients of zeros where eager has None)
                what = "zeros"
            out.append(Verdict(NAME, Status.FAIL, kind=f"{kind}:{what}", where=label,
                               message=f"called {e[label]} times in eager, {c[label]} in the compiled run"))
        else:
            out += _matched(outcome, "backward", label, ordered=False)
    return out


def _zeros(value) -> bool:
    """A hook's value that holds gradients and every one of them zero (None counts as no gradient)."""
    parts = value if isinstance(value, (tuple, list)) else (value,)
    tensors = [t for t in parts if isinstance(t, torch.Tensor)]
    return bool(tensors) and len(tensors) + sum(t is None for t in parts) == len(parts) and \
        not any(bool(t.ne(0).any()) for t in tensors)


def _matched(outcome: Outcome, phase: str, label: str, ordered: bool) -> list[Verdict]:
    """Each eager value of ``label`` against a compiled one: the one in its place (``ordered``), else
    any not yet matched that agrees (the referee's value in eager's place sets the tolerance)."""
    exp, act = _values(outcome.eager, phase, label), _values(outcome.compiled, phase, label)
    ref = _values(outcome.reference, phase, label)
    ref = ref if len(ref) == len(exp) else [None] * len(exp)
    judged = numerics(outcome)
    free = list(range(len(act)))
    kind = f"{promise(label)[1]}:value"
    for k, (e, r) in enumerate(zip(exp, ref)):
        candidates = [k] if ordered else free
        first = None
        for j in candidates:
            diff = compare(e, act[j], r, judged["floor"], judged["signed_zeros"])
            if diff is None or diff.inconclusive:
                if j in free:
                    free.remove(j)
                break
            first = first or diff
        else:
            return [Verdict(NAME, Status.FAIL, kind=kind, where=label,
                            message=f"call {k} of {len(exp)}: {first.message if first else 'no value to match'}")]
    return [Verdict(NAME, Status.PASS, where=label)]


def _order(eager: Execution, compiled: Execution) -> list[Verdict]:
    """A site's pre-hook records come before its hook records: at no point of the run more hook records
    than pre-hook records of the same site, in the compiled run where eager keeps it so."""
    out = []
    for pre, post in ORDERED:
        early = _early(compiled, pre, post)
        if early and not _early(eager, pre, post):
            site = early[: -len(post)]
            out.append(Verdict(NAME, Status.FAIL, kind="hook:order", where=early,
                               message=f"{early} ran before {site}{pre}"))
    return out


def _early(run: Execution, pre: str, post: str) -> str:
    """The first ``post`` record with no ``pre`` record of its site left before it ("": none)."""
    seen: Counter = Counter()
    for _, label, _ in run.trace:
        if label.endswith(pre):
            seen[label[: -len(pre)]] += 1
        elif label.endswith(post):
            seen[label[: -len(post)]] -= 1
            if seen[label[: -len(post)]] < 0:
                return label
    return ""
