"""Dedup on/off equivalence: the same program on the same backend with
deduplication on and off gives the same outputs, mutated inputs, gradients
and guards.

Forward values must agree bitwise where the backend runs the same kernels
either way (``Backend.bitwise``), otherwise within tolerance; gradients within
tolerance always, since autograd may sum a value's contributions in another
order once part of the graph is a subgraph call.
"""

from __future__ import annotations

import collections
import re

from harness.backends import resolve
from harness.capabilities import has
from harness.outcome import Outcome

from .differential import compare_runs, nondeterministic, numerics
from .verdict import Status, Verdict, combine

NAME = "dedup_toggle"
# Guards are taken from the second capture with deduplication on where one
# was made, else from the main capture: the first compile in a process may
# install guards of its own (seen: ID_MATCH on the torch module), so only two
# compiles that both follow another are comparable, and the pipeline always
# captures twice where the main compile was the process's first
# (harness.pipeline.recapture_sampled_out).
NEEDS = ("dedup_off", "recapture")
# Only the guard comparison reads the second capture; the first failure wins (``combine``), values before guards,
# so a re-run without it judges a failure of any other kind as one with it would.
NEEDS_ONLY_FOR = (("recapture", ("guards",)),)


# What is not part of a guard (guard_difference): the process-wide counters in its text, as (pattern,
# replacement) in the order applied (a module hook's handle id, the globals dicts Dynamo numbers, the globals it
# names by object and compile id, the program module's name, which each load of its source has its own of:
# harness.loader), and the guards left out whole (a module's identity). The dedup_guards repro
# (reports/templates/repro/guard.py.j2) is rendered with the same.
COUNTERS = ((r"(_hooks\w*)\[\d+\]", r"\1[N]"), (r"___\d+", "___N"), (r"_\d+_c\d+\b", "_ID_cN"),
            (r"\bgp_[0-9a-f]{16}\b", "gp_ID"))
LEFT_OUT = r"ID_MATCH __import__\("


def _stable(guard: str) -> str:
    for pattern, replacement in COUNTERS:
        guard = re.sub(pattern, replacement, guard)
    return guard


_IMPORTED = re.compile(LEFT_OUT)


def guard_difference(on: list[str], off: list[str]) -> tuple[list[str], list[str]]:
    """(extra, missing): guards by kind and name that ``on`` has beyond
    ``off`` and lacks. Dynamo numbers the globals dicts it installs
    (``__builtins_dict___6``) with a process-wide counter, and names the
    globals it installs by object id and compile id (``_140620626826704_c11``,
    torch 2.8), and a module's hook dicts are keyed by the handle id of each
    registration (``_forward_hooks_always_called[8251]``, a process-wide
    counter: each model instance's differ): none is part of the guard. An
    ID_MATCH on an imported module (``__import__('torch')``) is left out too:
    the first trace of a program in a process installs it (pytree's flatten
    inside invoke_subgraph, under nested_compile_region), later ones do not,
    with deduplication on or off, ``torch._dynamo.reset()`` or not; compared
    with the dedup-off compile that follows, a first compile "had" it."""
    a, b = (collections.Counter(_stable(g) for g in guards if not _IMPORTED.match(g)) for guards in (on, off))
    return sorted((a - b).elements()), sorted((b - a).elements())


def check(outcome: Outcome) -> Verdict:
    if not outcome.config.dedup:
        return Verdict(NAME, Status.PASS, message="deduplication off in the main run")
    if "dedup_off" in outcome.spared:
        return Verdict(NAME, Status.PASS, message=f"not compiled again: {outcome.spared['dedup_off']}")
    off = outcome.companions.get("dedup_off")
    if off is None:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="not_run", message="no run with deduplication off")
    on, (off_run, off_capture) = outcome.compiled, off
    if on.failure is not None or off_run.failure is not None:
        which = "on" if on.failure is not None else "off"
        return Verdict(NAME, Status.INCONCLUSIVE, kind="crash", message=f"the run with deduplication {which} crashed")
    if nondeterministic(outcome.eager, outcome.eager_again):
        return Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", message="eager disagrees with itself")
    exact = ("output", "state") if resolve(outcome.config.backend).bitwise else ()
    verdicts = compare_runs(NAME, off_run, on, outcome.reference, exact=exact, **numerics(outcome))
    warm = outcome.companions.get("recapture")
    # without guard_filter_fn no guard is recorded (the report says so once)
    extra, missing = guard_difference((warm[1] if warm else outcome.capture).guards, off_capture.guards) \
        if has("guard_filter_fn") else ([], [])
    if extra or missing:
        verdicts.append(Verdict(NAME, Status.FAIL, kind="guards", where="guards",
                                message=f"with deduplication: extra guards {extra[:5]}, missing guards {missing[:5]}",
                                details={"extra": extra, "missing": missing, "label": "guards"}))
    return combine(NAME, verdicts)
