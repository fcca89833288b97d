"""Turn a failing verdict into a finding with a stable signature.

A signature names the bug, not the program: the oracle, the kind of failure,
the layer to blame (re-run with deduplication off: if the failure goes away,
the pass is to blame) and, for wrong values, which kind of difference between
repeats it needs (a Python argument's type, a tensor attribute, a context
field), found by taking the differences away one kind at a time, and which
spellings of its ops (``generators.spellings``: a method, an aten overload,
a module...) it needs, found by writing them back in their ops' defaults.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Optional

from generators.check import check as well_formed, checked
from generators.ir import MalformedProgram, Program, respelled, spelled, taking
from generators.opinfo import cases_of
from generators.variation import equalize
from generators.variants import change_key
from harness.outcome import Execution, Outcome, RunConfig
from harness.pipeline import InvalidProgram, add_companions, region_twins, run_fresh, run_program, without_dedup
from harness.replay import ReplayOutcome, run_replay
from oracles import compile_region, dedup_toggle, determinism, differential, guards, region_reuse
from oracles.differential import compare_runs, numerics
from oracles.registry import ORACLES, REPLAY_ORACLES
from oracles.verdict import Status, Verdict

from .known_issues import match, matching
from .signature import normalize
from .triggers import CLAIMED, claimed, tags


@dataclass
class Finding:
    signature: str
    verdict: Verdict
    program: Program
    config: RunConfig
    culprit: str  # "dedup" or "backend"
    trigger: str  # for wrong values: the arg types that must differ; else ""
    source: str = ""
    extra: dict = field(default_factory=dict)


def spellings(program: Program) -> list[str]:
    """The ops the program writes in another spelling than their default,
    as ``op:kind`` (``relu:method``), each once: what a finding's description
    says its program is written in."""
    return list(dict.fromkeys(f"{s.op}:{s.spelling}" for _, _, s in spelled(program)))


def _plainly_spelled(program: Program, kinds: set[str]) -> Program:
    """``program`` with the statements spelled in ``kinds`` written in their ops' defaults."""
    for name, i, s in spelled(program):
        if s.spelling in kinds:
            program = respelled(program, name, i, "")
    return program


def _needed(names: list, keeping: Callable[[list], Optional[Program]], config: RunConfig,
            oracle: Callable[[Outcome], Verdict], like: Verdict) -> list:
    """Which of ``names`` (parts of the program that ``keeping(kept)`` keeps
    only some of; None where it cannot) a failure needs: none where the
    program fails alike keeping none; else each taken away in turn, and kept
    away if the failure stays."""
    def alike_(kept: list) -> bool:
        program = keeping(kept)
        return program is not None and fails_alike(program, config, oracle, like)

    if not names or alike_([]):
        return []
    needed = list(names)
    for name in names:
        trial = [n for n in needed if n != name]
        if trial and alike_(trial):
            needed = trial
    return needed


def _spelling(program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict], like: Verdict) -> str:
    """The spelling kinds a wrong value needs, as ``spelled=method`` (two or
    more joined by ``+``; a backend that mishandles one node of one form)."""
    kinds = sorted({s.spelling for _, _, s in spelled(program)})
    needed = _needed(kinds, lambda kept: _plainly_spelled(program, set(kinds) - set(kept)), config, oracle, like)
    return "spelled=" + "+".join(needed) if needed else ""


def _options(field: str, program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict],
             like: Verdict) -> str:
    """The entries of ``Options.<field>`` a failure needs, as ``<field>=name`` (two joined by ``+``): the torch
    settings (generators.settings: ``settings=inline.every``) and the autograd features (generators.autograd:
    ``autograd=tensor.output``; a known crash that a program with a hook also meets is the known crash still)."""
    names = list(getattr(program.options, field))

    def keeping(kept: list) -> Optional[Program]:
        return checked(replace(program, options=replace(program.options, **{field: tuple(n for n in names
                                                                                      if n in kept)})))

    needed = _needed(names, keeping, config, oracle, like)
    return f"{field}=" + "+".join(needed) if needed else ""


def _interface(program: Program) -> dict[str, Callable[[Program], Program]]:
    """What its blocks are given (generators.inputs), by label: how the layer's extra tensors travel
    (``extras.tuple``), what a block takes beside them (``module``; ``sub.optional`` for sub-blocks', one
    label for all that take alike); each with what takes it away."""
    parts: dict[str, Callable[[Program], Program]] = {}
    if program.block.extras != "positional":
        parts[f"extras.{program.block.extras}"] = lambda p: replace(p, block=replace(p.block, extras="positional"))
    for b in program.blocks():
        if b.takes:
            label = f"{'sub.' if b.name else ''}{b.takes}"
            before = parts.get(label)
            parts[label] = lambda p, name=b.name, before=before: taking(before(p) if before else p, name, "")
    return parts


def _trigger_and_inputs(program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict], like: Verdict,
                        dedup: bool, parts: Optional[dict[str, Callable[[Program], Program]]] = None) -> tuple[str, str]:
    """The differences between repeats (``_trigger``) and what a block is given (``inputs=module``, labels of
    ``_interface`` joined by ``+``; ``parts``: those searched, default all) that a wrong value needs, searched
    together. Apart, a failure that either explains alone (a float merged through a callable argument and
    through a value read from ``h.requires_grad``) lost each while the other kept it failing, and was named for
    neither (``identical-repeats``), a signature no known issue claims. Together, what a block is given is
    taken away first: a difference between repeats is what a region's reuse is about."""
    kinds = sorted(program.variations())
    parts = _interface(program) if parts is None else parts
    names = [("inputs", label) for label in parts] + [("kind", k) for k in kinds]

    def keeping(kept: list) -> Optional[Program]:
        kept_program = equalize(program, [k for k in kinds if ("kind", k) not in kept]) if kinds else program
        if kept_program is None:
            return None
        for label, away in parts.items():
            if ("inputs", label) not in kept:
                kept_program = away(kept_program)
        return checked(kept_program)

    needed = _needed(names, keeping, config, oracle, like)
    needed_kinds = [k for what, k in needed if what == "kind"]
    if kinds and len(needed_kinds) == len(kinds) > 2:
        needed_kinds = _smallest_set(program, config, oracle, like, kinds)
    given = [label for what, label in needed if what == "inputs"]
    trigger = "+".join(_named(program, k) for k in needed_kinds) if needed_kinds else \
        ("identical-repeats" if kinds or dedup else "")
    return trigger, "inputs=" + "+".join(given) if given else ""


def alike(other: Verdict, like: Verdict) -> bool:
    """``other`` fails the way ``like`` did: same kind, and for a crash the
    same error. (A program may fail another way too, for another reason.)"""
    if not other.failed or other.kind != like.kind:
        return False
    return like.kind != "crash" or normalize(other.message) == normalize(like.message)


class _Reruns:
    """Re-runs shared by the triage of one run's failures: each program is run
    once with the recorder if any failing oracle reads it, and judged by each
    oracle from that one run; a companion is compiled next to it when the
    first oracle that reads it asks (one failure's re-runs are not made with
    what only another's read). Re-runs with changed calls (a failure after a
    change, ``RunConfig.changes``) are their own."""

    def __init__(self, oracles: list) -> None:
        self.structure = any(o.structure for o in oracles)
        self.runs: dict = {}
        self.named: dict = {}  # (oracle, kind, where) -> (trigger, detail) a wrong value blamed on the pass got

    def run(self, program: Program, config: RunConfig) -> Outcome:
        wide = replace(config, record_structure=config.record_structure or self.structure)
        key = (program.to_json(), replace(wide, companions=()))
        if key not in self.runs:
            self.runs[key] = run_program(program, wide)
        else:
            add_companions(self.runs[key], wide.companions)
        return self.runs[key]


_shared: _Reruns | None = None


@contextlib.contextmanager
def shared_reruns(oracles: list) -> Iterator[None]:
    """Within it, triage's re-runs of one program serve every failing oracle
    in ``oracles``."""
    global _shared
    saved, _shared = _shared, _Reruns(oracles)
    try:
        yield
    finally:
        _shared = saved


# Where the pass is to blame for a wrong value the differential oracle saw (the run without it is right), the
# dedup-toggle oracle sees the same wrong value, at the same place, between the runs with and without it: its
# re-runs, each compiled twice, would take away what the differential's took away and keep what they kept
# (for each one, the run without the pass stays right), so it is named by the differential's search. Where a
# run without the pass goes wrong too the two differ, and the differential's finding names the cause.
NAMED_BY = {dedup_toggle.NAME: differential.NAME}


def _named_by_sibling(verdict: Verdict, culprit: str) -> Optional[tuple[str, str]]:
    if _shared is None or culprit != "dedup" or verdict.oracle not in NAMED_BY:
        return None
    return _shared.named.get((NAMED_BY[verdict.oracle], verdict.kind, verdict.where))


def _remember(verdict: Verdict, culprit: str, trigger: str, detail: str) -> None:
    if _shared is not None and culprit == "dedup":
        _shared.named.setdefault((verdict.oracle, verdict.kind, verdict.where), (trigger, detail))


def _rerun(program: Program, config: RunConfig) -> Outcome:
    return _shared.run(program, config) if _shared is not None else run_program(program, config)


def fails_alike(program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict], like: Verdict) -> bool:
    return alike(oracle(_rerun(program, config)), like)


def fingerprint(outcome: Outcome, verdict: Verdict, partial: str) -> str:
    """What a wrong-value finding's signature is decided by, short of the
    re-runs that blame a layer and name the difference between repeats it
    needs: the partial signature (oracle, kind, label, tags, where, change),
    the kinds of difference and of spelling the program has to take away,
    and whether its compile grouped anything. Two hits with one fingerprint
    were triaged alike so far (a campaign samples re-hits to keep checking that)."""
    spelt = sorted({s.spelling for _, _, s in spelled(outcome.program)})
    return "|".join([partial, ",".join(sorted(outcome.program.variations())),
                     str(verdict.details.get("twin", "")), f"grouped={outcome.capture.deduplicated}",
                     *([f"spelled={'+'.join(spelt)}"] if spelt else []),
                     *([f"settings={'+'.join(outcome.program.options.settings)}"] if outcome.program.options.settings else []),
                     *([f"autograd={'+'.join(outcome.program.options.autograd)}"] if outcome.program.options.autograd else []),
                     *([f"inputs={'+'.join(given)}"] if (given := _interface(outcome.program)) else [])])


def _alias_change(details: dict) -> str:
    """An aliasing difference as a class: what an output shares storage with that it did not in eager
    (``gained:output``, ``gained:input``), or no longer does (``lost:input``, ``lost:output``)."""
    def kind(owner: str) -> str:
        return owner.split("[")[0].split(":")[0]

    expected, actual = details.get("expected", ""), details.get("actual", "")
    if not expected:
        return f"gained:{kind(actual)}"
    return f"lost:{kind(expected)}" if not actual else f"moved:{kind(expected)}>{kind(actual)}"


def _recalled(learned: dict | None, fp: str, verdict: Verdict, outcome: Outcome, config: RunConfig) -> Finding | None:
    if not learned or not learned.get(fp):
        return None
    signature = learned[fp]
    return Finding(signature, verdict, outcome.program, config, signature.split(":")[2], "", outcome.source,
                   {"fingerprint": fp, "recalled": True})


def _history(outcome: Outcome, verdict: Verdict) -> tuple[str, ...]:
    """The changed calls a re-run of a failure after a change makes (``RunConfig.changes``): that change, after
    the changes before it that recompiled (each later call meets their entries); the others can neither add
    to it nor take from it, and a re-run that made them could fail alike through another change only.
    Empty (every change is made) where the failure names none."""
    variant = verdict.details.get("variant")
    if not variant:
        return ()
    before = []
    for run in outcome.capture.variants:  # (a verdict read back from JSON holds lists where the run holds tuples)
        if change_key(run.variant) == change_key(variant) and run.variant["description"] == variant["description"]:
            return (*before, change_key(variant))
        if run.recompiled and run.compiled is not None:
            before.append(change_key(run.variant))
    return ()


def triage(outcome: Outcome, verdict: Verdict, learned: dict | None = None) -> Finding:
    """``learned``: fingerprint -> signature of earlier hits; a wrong-value
    hit whose fingerprint is there takes that signature without the re-runs
    (``Finding.extra["recalled"]``). Every wrong-value finding carries its
    fingerprint in ``extra``. A signature a known issue matches in a run
    lacking one of its triggers is that issue's no more (reports.triggers)."""
    return claimed(_triage(outcome, verdict, learned))


def _triage(outcome: Outcome, verdict: Verdict, learned: dict | None = None) -> Finding:
    program = outcome.program
    oracle = ORACLES[verdict.oracle]
    # Re-runs pay only for what this oracle reads: no changed re-calls or
    # pass recorder unless it judges them.
    config = replace(outcome.config, companions=oracle.needs_for(verdict.kind),
                     variants=outcome.config.variants if oracle.variants else 0,
                     record_structure=outcome.config.record_structure and oracle.structure,
                     changes=_history(outcome, verdict) if oracle.variants else ())
    if verdict.oracle == compile_region.NAME:
        return _triage_region(outcome, verdict, config, learned)
    trigger, extra = "", {}
    # Wrong inputs or buffers after the run are a class of their own, and
    # so is a wrong call after a change (guards: the kind of change).
    where = ["state"] if verdict.where.startswith("state[") or verdict.details.get("value", "").startswith("state[") else []
    where += [_alias_change(verdict.details)] if verdict.kind == "aliasing" else []
    change = [verdict.details["variant"]["kind"]] if "variant" in verdict.details else []
    wrong_values = verdict.kind != "crash" and "label" not in verdict.details
    kind = verdict.kind
    if kind == "stale" and _fresh_entry_alike(outcome, verdict):
        # Not stale: an entry compiled for the change returns the very same
        # result, so no guard could have helped; the change (new input values
        # where the first call's hid the bug) only revealed a wrong compile.
        # Named like a wrong new entry (guards.py: "recompiled"); re-runs are
        # still judged alike by the stale kind the oracle gives them.
        wrong_values, kind = True, verdict.details.get("difference", "mismatch")
        extra["fresh_entry_alike"] = True
    if wrong_values:
        extra["fingerprint"] = fp = fingerprint(outcome, verdict, ":".join([verdict.oracle, kind, *tags(program),
                                                                           *where, *change]))
        found = _recalled(learned, fp, verdict, outcome, config)
        if found is not None:
            return found
    culprit = OWN_CULPRIT.get(verdict.oracle, "backend")
    # a capture without the pass is captured again only to blame determinism
    off_config = replace(config, spare=verdict.oracle != determinism.NAME)
    if verdict.oracle not in OWN_CULPRIT and config.dedup and not alike(oracle(without_dedup(outcome, off_config)),
                                                                         verdict):
        culprit = "dedup"
    if verdict.kind == "crash":
        # (what a block is given is not named: a crash's stage and message name its cause, and a known crash
        # that only a container or a keyword reaches, by defeating a region's reuse, is the same crash)
        detail = ":".join(p for p in (verdict.details.get('stage'), normalize(verdict.message),
                                      _options("settings", program, config, oracle, verdict),
                                      _options("autograd", program, config, oracle, verdict)) if p)
    elif not wrong_values:  # structural oracles name the difference themselves
        label = verdict.details["label"]
        if verdict.kind == "stale" and (verdict.details.get("variant") or {}).get("neutral") and program.variations():
            # Stale after a change the program does not read (the same call
            # again, model.eval() on a function): what left an entry serving
            # the wrong result was a difference between repeats inside the
            # call (a callable argument recompiled a frame without a guard,
            # ...). Name the kinds it needs.
            trigger = _trigger(program, config, oracle, verdict)
            trigger = "" if trigger == "identical-repeats" else trigger
        program_tags = [*tags(program), *opinfo_tag(program)]
        signature = _structural(verdict.oracle, kind, culprit, label, trigger, program_tags)
        if len(verdict.details.get("differences", ())) > 1:
            verdict, signature = _unexplained(verdict, signature, config.backend, lambda d: _structural(
                verdict.oracle, d["kind"], culprit, d["label"], trigger, program_tags))
        return Finding(signature, verdict, program, config, culprit, trigger, outcome.source, extra)
    elif (named := _named_by_sibling(verdict, culprit)) is not None:
        (trigger, detail), extra["named_by"] = named, NAMED_BY[verdict.oracle]
    else:
        trigger, given = _trigger_and_inputs(program, config, oracle, verdict, culprit == "dedup")
        if culprit != "dedup" and trigger == "identical-repeats":
            trigger = ""  # a backend failing on identical repeats: nothing between repeats to name
        spelt = _spelling(program, config, oracle, verdict)
        detail = ":".join(p for p in (trigger, *tags(program), *opinfo_tag(program), spelt,
                                      _options("settings", program, config, oracle, verdict),
                                      _options("autograd", program, config, oracle, verdict),
                                      given, *where, *change) if p)
        _remember(verdict, culprit, trigger, detail)
    if verdict.kind != "crash":  # a tag the trigger already names is said once
        detail = ":".join(dict.fromkeys(detail.split(":")))
    signature = ":".join(p for p in (verdict.oracle, kind, culprit, detail) if p)
    return Finding(signature, verdict, program, config, culprit, trigger, outcome.source, extra)


# Oracles that judge the run without deduplication only: the pass is never the culprit, their machinery is.
OWN_CULPRIT = {region_reuse.NAME: "compile_region"}


def opinfo_tag(program: Program) -> list[str]:
    """A wrong value of an OpInfo case names its op (``opinfo=<op>``): an op's own bug is a class of its own,
    which a known issue can claim without claiming every plain wrong value of a backend."""
    ops = sorted({c.op for c in cases_of(program)})
    return [f"opinfo={'+'.join(ops)}"] if ops else []


def _structural(oracle: str, kind: str, culprit: str, label: str, trigger: str, program_tags: list[str]) -> str:
    """A structural finding's signature: the oracle's label, then the
    trigger and the program's tags, a part the label already names said once."""
    detail = ":".join(dict.fromkeys(p for p in (*label.split(":"), trigger, *program_tags) if p))
    return ":".join(p for p in (oracle, kind, culprit, detail) if p)


def _unexplained(verdict: Verdict, signature: str, backend: str, named: Callable[[dict], str]) -> tuple[Verdict, str]:
    """A structural finding is known only if a recorded issue explains each
    of its differences (``verdict.details["differences"]``): else it is
    the first difference none explains, named by ``named``, so a new cause
    in a group with a known one reads as new."""
    if not match(signature, backend):
        return verdict, signature
    for d in verdict.details["differences"]:
        other = named(d)
        if not match(other, backend):
            details = {**verdict.details, **{k: v for k, v in d.items() if k not in ("kind", "where", "message")}}
            return replace(verdict, kind=d["kind"], where=d["where"], message=d["message"], details=details), other
    return verdict, signature


def _fresh_entry_alike(outcome: Outcome, verdict: Verdict) -> bool:
    """Whether a stale guard verdict's wrong result, served by the first
    call's entry, is what a fresh compile called first under the same change
    returns too (bitwise: outputs, gradients, state), and no guard is seen
    missing without the pass either (on the run's backend and on eager, a
    fresh entry and the first call's entry agree on the change): then the entry was not stale, only wrong for
    these values all along. Anything less (another value, a crash, noise, a
    guard missing where the pass does not mask it) keeps the finding stale."""
    runs, mode = guards.judged_runs(outcome)
    run = next((r for r in runs if r.variant == verdict.details.get("variant")), None)
    if run is None or not run.served_by_original or run.compiled is None or run.compiled.failure is not None:
        return False  # an entry an earlier change compiled: its history is not re-made here
    if run.variant["kind"].rsplit(":", 1)[-1] == "sign":
        # The other signed zero passes a guard comparing floats with == (KI-025): a fresh compile under the
        # change reuses, through that same guard, an entry another instance of the class compiled in the
        # same call (a frame of its own: two Blocks, s0 = -0.0 and 0.0), so its agreeing proves nothing.
        return False
    num = numerics(outcome)

    def same(a: Execution, b: Execution) -> bool:
        return a.failure is None and b.failure is None and all(
            v.status is Status.PASS for v in compare_runs(guards.NAME, a, b, None, exact=("output", "state", "grad"),
                                                          **num))

    config = replace(outcome.config, dedup=mode == "on" and outcome.config.dedup, variants=0, companions=())
    if not same(run.compiled, run_fresh(outcome.program, config, run.variant)):
        return False
    for backend in dict.fromkeys((config.backend, "eager")):
        off = replace(config, backend=backend, dedup=False)
        if not same(run_fresh(outcome.program, off, run.variant, first_call=True),
                    run_fresh(outcome.program, off, run.variant)):
            return False
    return True


def _trigger(program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict], like: Verdict) -> str:
    """The kinds of difference between repeats the failure needs (e.g.
    ``arg:float``, ``context:autocast``, ``tensor:dtype``; two or more joined
    by ``+``), found by taking each kind away in turn and keeping it away if
    the failure stays; "identical-repeats" when it fails with no difference
    at all. A program that fails another way without a kind (another known
    crash) does not count as failing."""
    return _trigger_and_inputs(program, config, oracle, like, True, parts={})[0]


# Re-runs the set search may spend on one finding: it runs only where no
# single kind could be taken away (rare), smallest sets first.
SET_TRIES = 12


def _smallest_set(program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict], like: Verdict,
                  kinds: list[str]) -> list[str]:
    """When no single kind can be taken away (each alone is needed, or
    cannot be equalized alone), take away as many as possible together: the
    smallest set of kinds that, kept alone, still fails alike (at most
    ``SET_TRIES`` re-runs); all of them if none does."""
    tries = 0
    for size in range(1, len(kinds) - 1):
        for kept in itertools.combinations(kinds, size):
            candidate = equalize(program, [k for k in kinds if k not in kept])
            if candidate is None:
                continue
            tries += 1
            if fails_alike(candidate, config, oracle, like):
                return list(kept)
            if tries >= SET_TRIES:
                return kinds
    return kinds


def _named(program: Program, kind: str) -> str:
    """A kind as a signature says it. Aliased calls say whether the first
    repeat is the aliased one: the pass builds a group's subgraph from its
    first region, so that is a cause of its own."""
    if kind == "alias":
        first = next((c for _, c in program.repeats()), None)
        return "alias:first" if first is not None and first.alias else "alias:later"
    return kind


def _triage_region(outcome: Outcome, verdict: Verdict, config: RunConfig, learned: dict | None) -> Finding:
    """A ``compile_region`` finding: the decorator changed what the program
    computes. Culprit ``compile_region`` when a pair compiled without
    deduplication differs (the oracle judges those first), ``dedup`` when
    only the pair with deduplication does. The detail is the oracle's label
    (``removed:level2:later_call``; a ``later_call`` that a single call in the
    program's first layer repeat still shows becomes ``first_call``), then
    for a crash the side that crashed, its stage and error, else the tags.
    A crash also carries the signature the differential oracle gives that
    crash (``extra["equivalent"]``), so a known crash met through a twin or
    the dedup-off run is reported as that known issue."""
    program, details = outcome.program, verdict.details
    culprit = "dedup" if details.get("dedup") else "compile_region"
    label, extra = details.get("label", details.get("twin", "")), {}
    if verdict.kind == "crash":
        error = normalize(f"{details.get('type')}: {details.get('error', '')}")
        detail = f"{label}:{details.get('side')}:{details.get('stage')}:{error}"
        extra["equivalent"] = f"differential:crash:{'dedup' if details.get('dedup') else 'backend'}:" \
                              f"{details.get('stage')}:{error}"
    else:
        extra["fingerprint"] = fp = fingerprint(outcome, verdict, ":".join([verdict.oracle, verdict.kind, culprit, label,
                                                                           *tags(program)]))
        found = _recalled(learned, fp, verdict, outcome, config)
        if found is not None:
            return found
        if label.endswith(":later_call") and _first_call_fails(program, config, verdict):
            label = label.removesuffix(":later_call") + ":first_call"
        # every program this oracle fails has a decorated block: that tag says nothing here
        trigger = _trigger(program, config, compile_region.check, verdict) if program.variations() else ""
        trigger = "" if trigger == "identical-repeats" else trigger
        detail = ":".join(dict.fromkeys([*label.split(":"), *([trigger] if trigger else []),
                                         *(t for t in tags(program) if t != "compile_region")]))
    signature = ":".join(p for p in (verdict.oracle, verdict.kind, culprit, detail) if p)
    return Finding(signature, verdict, program, config, culprit, "", outcome.source, extra)


def first_repeat(program: Program) -> Program | None:
    """The program cut to its first layer repeat (None: not well formed)."""
    s = program.sections[0]
    cut = replace(program, sections=(replace(s, calls=s.calls[:1], outer=1),), interludes=())
    try:
        well_formed(cut)
    except MalformedProgram:
        return None
    return cut


def _first_call_fails(program: Program, config: RunConfig, verdict: Verdict) -> bool:
    """Whether the program cut to its first layer repeat, where every block
    the twin changes is called once, still differs from that twin alike."""
    cut = first_repeat(program)
    if cut is None or cut == program:
        return False
    twin = next((t for label, t in region_twins(cut) if label == verdict.details.get("twin")), None)
    counts: dict[str, int] = {}
    for c in cut.block_calls():
        counts[c.block] = counts.get(c.block, 0) + 1
    if twin is None or any(counts.get(b, 0) > 1 for b in compile_region.changed_blocks(cut, twin)):
        return False
    try:
        again = compile_region.check(_rerun(cut, config))
    except InvalidProgram:
        return False
    return alike(again, verdict) and again.details.get("twin") == verdict.details.get("twin") \
        and again.details.get("dedup") == verdict.details.get("dedup")


# Findings about results read again later: CUDA graphs' own promises.
HELD_KINDS = ("stale_output", "read_error", "overwritten_in_step")


def triage_replay(replay: ReplayOutcome, verdict: Verdict) -> Finding:
    """A CUDA-graph finding: blamed on the pass if the same plan passes with
    deduplication off, on CUDA graphs if the plain compile got that call
    right, else on the backend; the detail names the phase (warm-up, record,
    replay, resize) and the kind of value (output, grad, state)."""
    program, plan = replay.program, replay.plan
    oracle = REPLAY_ORACLES[verdict.oracle]
    culprit = "cudagraphs" if verdict.details.get("plain_agrees") or verdict.kind in HELD_KINDS else "backend"
    if verdict.kind == "crash" and verdict.details.get("plain_crashed") is False:
        culprit = "cudagraphs"
    if replay.dedup:
        again = oracle(run_replay(program, plan, replay.backend, replay.plain, replay.device, dedup=False))
        if not alike(again, verdict):
            culprit = "dedup"
    value = verdict.details.get("value", "").split("[")[0]
    if verdict.kind == "crash":
        detail = f"{verdict.details.get('phase', 'compile')}:{verdict.details.get('stage')}:{normalize(verdict.message)}"
    elif "label" in verdict.details:
        detail = verdict.details["label"]
    else:
        # a held result's phase is its call's: torch poisons what a warm-up or recording leaves, not what a
        # replay does (pytorch/pytorch#122192), so a stale result after each is a cause of its own
        detail = ":".join(p for p in (verdict.details.get("phase", ""), value, *tags(program)) if p)
    signature = ":".join(p for p in (verdict.oracle, verdict.kind, culprit, detail) if p)
    config = RunConfig(backend=replay.backend, dedup=replay.dedup)
    extra = {"plan": plan.to_dict(), "plain": replay.plain, "device": replay.device}
    if culprit != "cudagraphs":
        extra.update(_equivalent(replay, verdict))
    return claimed(Finding(signature, verdict, program, config, culprit, "", replay.source, extra))


def _equivalent(replay: ReplayOutcome, verdict: Verdict) -> dict:
    """When the compile without CUDA graphs fails too, the bug is the
    differential oracle's (or, for leaked dispatch state, the hygiene
    oracle's): its signature for the same program on the plain backend (on
    CPU, the main pipeline), which the known-issues baseline names. A failure
    the CPU run does not show keeps its own signature."""
    if verdict.kind == "crash" and normalize(verdict.details.get("plain_failure", "")) != normalize(verdict.message):
        return {}
    outcome = run_program(replay.program, RunConfig(backend=replay.plain, dedup=replay.dedup, backward=replay.plan.backward,
                                                    record_structure=False))
    found = ORACLES["hygiene" if verdict.kind == "leaked_state" else "differential"](outcome)
    if not found.failed or (found.kind == "crash") != (verdict.kind == "crash"):
        return {}
    return {"equivalent": triage(outcome, found).signature}


def known_issue(finding: Finding):
    """The known issue a finding is, by its signature or by the equivalent
    signature of the oracle whose bug it is (``Finding.extra["equivalent"]``);
    none for a failure in a run lacking the trigger of the issue it matches
    (reports.triggers.claimed)."""
    backend = finding.config.backend
    claimed_by = finding.extra.get(CLAIMED)
    if claimed_by:
        return next(i for i in matching(finding.signature, backend) if i.id == claimed_by)
    # the equivalent signature is the plain compile's (a CUDA-graph finding's: inductor for reduce-overhead)
    return match(finding.signature, backend) or (
        match(finding.extra["equivalent"], finding.extra.get("plain") or backend) if "equivalent" in finding.extra
        else None)
