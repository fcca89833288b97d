"""Minimize a failing program: greedy reduction over the IR that keeps the failure.

A campaign keeps the smallest program that hit each signature, but "smallest
drawn" is still often a dozen statements over two sections. ``minimize`` walks
``generators.reduce.candidates`` (biggest cut first) and restarts from the
first candidate that still fails, until none does (a fixpoint) or time runs
out. Whether a candidate "still fails" is the caller's predicate: a cheap one
during the search (``fails_like``: one run, one oracle) and the full triage
signature once at the end (``keeps_signature``), because triage re-runs the
program several times and a cheap look-alike may be another bug
(``minimize_finding``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from generators.ir import Program
from generators.reduce import labeled_candidates, size
from harness.outcome import RunConfig
from harness.pipeline import InvalidProgram, run_program
from oracles.registry import ORACLES
from oracles.verdict import Verdict

from reports.triage import alike, triage

Predicate = Callable[[Program], bool]


@dataclass
class Minimized:
    program: Program
    tries: int  # predicate calls
    accepted: int  # candidates that still failed (each a restart)
    seconds: float
    size_before: int
    size_after: int
    finished: bool  # a fixpoint: no candidate of ``program`` fails (not cut short by deadline or tries)
    steps: list[str] = field(default_factory=list)  # kinds of the accepted reductions, in order
    rejected: Counter = field(default_factory=Counter)  # kind -> proposals check() turned down
    signature_kept: Optional[bool] = None  # minimize_finding: whether the result kept the signature


def minimize(program: Program, still_fails: Predicate, deadline: Optional[float] = None,
             max_tries: Optional[int] = None) -> Minimized:
    """Greedily shrink ``program`` while ``still_fails`` holds.

    ``deadline`` is a ``time.time()`` instant (as campaigns keep theirs). A
    predicate that raises is a different failure, so the candidate does not
    count as failing. ``program`` itself is not re-tested: the caller saw it
    fail. The result is never bigger than ``program`` by ``size``.
    """
    started = time.time()
    current, before = program, size(program)
    tries = accepted = 0
    steps: list[str] = []
    rejected: Counter = Counter()
    tested: set[str] = set()  # a deterministic predicate need not see a program twice
    finished = False

    def out_of_budget() -> bool:
        return (deadline is not None and time.time() >= deadline) or (max_tries is not None and tries >= max_tries)

    while not out_of_budget():
        limit = size(current)
        for label, candidate in labeled_candidates(current, rejected):
            if out_of_budget():
                break
            key = candidate.to_json()
            if key in tested or size(candidate) >= limit:
                continue
            tested.add(key)
            tries += 1
            try:
                fails = bool(still_fails(candidate))
            except Exception:  # noqa: BLE001 - another failure is not this one
                fails = False
            if fails:
                current, accepted = candidate, accepted + 1
                steps.append(label)
                break
        else:
            finished = True
            break
    return Minimized(current, tries, accepted, time.time() - started, before, size(current), finished, steps, rejected)


def _oracle_config(config: RunConfig, oracle_name: str) -> RunConfig:
    """The run the oracle needs (its companions only), as triage makes it."""
    return replace(config, companions=ORACLES[oracle_name].needs)


def fails_like(config: RunConfig, oracle_name: str, verdict_like: Verdict) -> Predicate:
    """One run and one oracle: fails the same kind of way (``triage.alike``:
    same kind, same normalized crash message) and, for structural oracles that
    name the difference themselves, with the same ``label``. Cheap, but blind
    to what triage adds (culprit, trigger, tags): see ``keeps_signature``."""
    oracle = ORACLES[oracle_name]
    cfg = _oracle_config(config, oracle_name)
    label = verdict_like.details.get("label")

    def predicate(program: Program) -> bool:
        try:
            verdict = oracle(run_program(program, cfg))
        except InvalidProgram:  # fails in eager: not a compiler finding at all
            return False
        if label is None:
            return alike(verdict, verdict_like)
        # a structural finding names one of the differences the oracle saw (reports.triage._unexplained)
        return verdict.failed and any(d.get("label") == label and d.get("kind", verdict.kind) == verdict_like.kind
                                      for d in [verdict.details, *verdict.details.get("differences", ())])

    return predicate


def keeps_signature(config: RunConfig, oracle_name: str, signature: str) -> Predicate:
    """Fails ``oracle_name`` and triages to exactly ``signature`` (several
    runs: triage re-runs with deduplication off and with differences removed)."""
    oracle = ORACLES[oracle_name]
    cfg = _oracle_config(config, oracle_name)

    def predicate(program: Program) -> bool:
        try:
            outcome = run_program(program, cfg)
            verdict = oracle(outcome)
            return verdict.failed and triage(outcome, verdict).signature == signature
        except InvalidProgram:
            return False

    return predicate


def minimize_finding(program: Program, config: RunConfig, oracle_name: str, verdict: Verdict, signature: str,
                     deadline: Optional[float] = None, max_tries: Optional[int] = None) -> Minimized:
    """What a campaign calls: search with ``fails_like``, then check the result
    once with ``keeps_signature``; if the signature changed on the way (the
    cheap predicate followed another bug), give back the original program."""
    started = time.time()
    result = minimize(program, fails_like(config, oracle_name, verdict), deadline, max_tries)
    if not result.accepted:
        kept = True  # the program the signature came from
    else:
        try:
            kept = keeps_signature(config, oracle_name, signature)(result.program)
        except Exception:  # noqa: BLE001 - another failure is not this one
            kept = False
    if not kept:
        result = replace(result, program=program, size_after=result.size_before)
    return replace(result, signature_kept=kept, seconds=time.time() - started)
