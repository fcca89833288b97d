"""A door finding (``oracles.door``) with a stable signature and the layer to blame.

The ladder: the same door without deduplication (the pass is to blame if
the failure goes away), then on the ``eager`` backend (the backend is, if it
goes away there); else torch's handling of the door (Dynamo, AOTAutograd,
export). A failure the plain compile of the same program shows too is that
compile's bug: its signature is kept as the finding's equivalent, which the
known-issues baseline names, so a known bug met through a door is known.
"""

from __future__ import annotations

from dataclasses import fields, replace

from generators.doors import DOORS
from generators.check import strict_mark_holds
from generators.ir import Context, MalformedProgram, Program
from harness.doors import DoorOutcome, run_door
from harness.outcome import RunConfig
from harness.pipeline import InvalidProgram, run_program
from oracles import door as door_oracle
from oracles.registry import DOOR_ORACLES, ORACLES
from oracles.verdict import Verdict

from .signature import normalize
from .triage import Finding, alike, triage
from .triggers import claimed, tags

# Doors whose compiled side runs no torch.compile backend: no backend rung.
NO_BACKEND = ("export:strict", "export:non_strict", "export:unflatten")
def _marked(strict: bool):
    """The first input's batch dimension marked, where it can be (a size of 0 or 1 is specialized by design);
    strictly only where no other input, weight or op may pin it (generators.check.strict_mark_holds: elsewhere a
    plain program with a strict mark is malformed, and the door's own run would be refused)."""
    def change(o, program):
        name, spec = program.inputs[0]
        return replace(o, mark_dynamic=((name, 0, strict and strict_mark_holds(program)),)) \
            if spec.shape and spec.shape[0] >= 2 else o
    return change


# The compile options of the plain program that matches a door's.
PLAIN_OPTIONS = {
    "dynamic:dynamic": lambda o, program: replace(o, dynamic=True),
    "dynamic:unbacked": lambda o, program: replace(o, dynamic=True),
    "dynamic:mark": _marked(True),
    "dynamic:maybe_mark": _marked(False),
}


def without_door(program: Program) -> Program:
    """The program called plainly, with the compile options its door implied."""
    o = replace(program.options, door="")
    change = PLAIN_OPTIONS.get(program.options.door)
    return replace(program, options=change(o, program) if change is not None else o)


def contexts(program: Program) -> list[str]:
    """The global state the program's calls change (a door may run the call
    under other state than its caller: a class of wrong values of its own)."""
    return [f"ctx:{f.name}" for f in fields(Context)
            if any(getattr(c.context, f.name) is not None for s in program.sections for c in s.calls)]


# Crashes already triaged in full in this process: fingerprint -> (signature,
# extra). A door crash's signature is decided by what the fingerprint holds
# (the door, the stage and normalized message, the program's tags, the run's
# backend and deduplication): one hit in SAMPLE_EVERY is triaged in full anyway.
_TRIAGED: dict[str, tuple[str, str, dict]] = {}
SAMPLE_EVERY = 4


def fingerprint(run: DoorOutcome, verdict: Verdict) -> str:
    return "|".join((verdict.oracle, verdict.kind, run.door, run.config.backend, str(run.config.dedup),
                     str(verdict.details.get("stage")), normalize(verdict.message), *tags(run.program),
                     *contexts(run.program)))


def triage_door(run: DoorOutcome, verdict: Verdict, plain=None) -> Finding:
    """``plain``: the main pipeline's outcome for the program without its
    door, where the worker has one (the equivalent is read from it, not run
    again)."""
    import zlib

    fp = fingerprint(run, verdict) if verdict.kind == "crash" else ""
    if fp in _TRIAGED and zlib.crc32(f"{fp}|{len(_TRIAGED)}|{run.source}".encode()) % SAMPLE_EVERY:
        signature, culprit, extra = _TRIAGED[fp]
        return Finding(signature, verdict, run.program, run.config, culprit, "", run.source,
                       {**extra, "recalled": True})
    finding = claimed(_triage_door(run, verdict, plain))
    if fp:
        _TRIAGED[fp] = (finding.signature, finding.culprit, dict(finding.extra))
    return finding


def _triage_door(run: DoorOutcome, verdict: Verdict, plain) -> Finding:
    program, config = run.program, run.config
    oracle = DOOR_ORACLES[verdict.oracle]
    role = verdict.details.get("role", "")
    if role == "eager_operator":
        culprit = "eager"  # the door's operator disagrees with its Python equivalent, uncompiled
    else:
        culprit = "dynamo"
        if config.dedup and not alike(oracle(run_door(program, replace(config, dedup=False))), verdict):
            culprit = "dedup"
        elif run.door not in NO_BACKEND and not DOORS[run.door].inductor and config.backend != "eager" \
                and not alike(oracle(run_door(program, replace(config, backend="eager"))), verdict):
            culprit = "backend"
    if verdict.kind == "crash":
        detail = f"{verdict.details.get('stage')}:{normalize(verdict.message)}"
    else:
        value = verdict.details.get("value", "").split("[")[0]
        detail = ":".join(p for p in (role, value, verdict.details.get("call", ""), *tags(program), *contexts(program))
                          if p)
    signature = ":".join(p for p in (verdict.oracle, verdict.kind, culprit, run.door, detail) if p)
    extra = {"door": run.door}
    if culprit != "eager" and verdict.oracle == door_oracle.NAME:
        extra.update(_equivalent(program, config, verdict, plain))
    return Finding(signature, verdict, program, config, culprit, "", run.source, extra)


def _equivalent(program: Program, config: RunConfig, verdict: Verdict, outcome=None) -> dict:
    """The plain compile's signature, where it fails the same way without the
    door (``outcome``: that compile's run already, if it is of the same
    program and backend)."""
    plain = without_door(program)
    if outcome is None or outcome.program != plain or outcome.config.backend != config.backend \
            or outcome.config.dedup != config.dedup:
        try:
            outcome = run_program(plain, RunConfig(backend=config.backend, dedup=config.dedup,
                                                   backward=config.backward, record_structure=False,
                                                   torch_config=config.torch_config))
        except (InvalidProgram, MalformedProgram):  # no plain program matches this door's
            return {}
    found = ORACLES["differential"](outcome)
    if not found.failed or (found.kind == "crash") != (verdict.kind == "crash"):
        return {}
    if verdict.kind == "crash" and normalize(found.message) != normalize(verdict.message):
        return {}
    return {"equivalent": triage(outcome, found).signature}
