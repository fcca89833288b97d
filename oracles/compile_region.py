"""``nested_compile_region`` as a metamorphic relation: the decorator may
change how a program is compiled, never what it computes.

The same program with the decorator removed, or moved one level up or down
the block hierarchy (``generators.regions``, the twins the pipeline's
``region`` companion compiles: ``harness.pipeline.region_twins``), must give
the same outputs, ``requires_grad``, inputs and buffers after the run and
gradients as the original, compiled on the same backend. Compared twice:
with deduplication as the main run has it (twins ``region:<label>`` against
the main run) and, when that is on, without it (``region:<label>:dedup_off``
against the program's ``dedup_off`` run), since region reuse works without
``use_graph_deduplication``; the dedup-off pairs are judged first, so a
failure they show is blamed on the region machinery, not on the pass. The
float64 eager run referees numerical noise, as in the differential oracle.

When the two disagree, eager referees: a twin that differs from eager next to
an original that agrees with it is inconclusive (``twin_wrong``: a bug of the
twin's own compile, such as a deduplication bug the decorator happened to
keep away, which the other oracles judge on programs like the twin).

A crash on one side only (the twin raises and the original does not, or the
reverse) is a finding of kind "crash" (``details["side"]``: "twin" or
"original"); an original that crashes in Dynamo makes its pairs inconclusive
(the differential oracle reports that crash; its twins are not compiled), and
the verdict is that of the other side, or inconclusive if both crashed so.

Labels (``details["label"]``): ``removed:<level>:<call>`` or
``moved:<levelA>-><levelB>:<call>``, where ``<level>`` is the level of the
decorated block(s) (the layer is level 1; several: ``level1+level3``) and
``<call>`` says whether reusing a traced body for a later call is needed:

- ``first_call``: every block the twin changes (the decorated one, and for
  a move the one that gets the decorator) is called at most once in the
  program, so nothing is reused: the one compiled body is itself wrong;
- ``later_call``: one of them is called more than once, so a later call may
  run a body traced for the first. Triage (``reports.triage``) narrows this
  down by running the program cut to its first layer repeat: if a single
  call there still shows the difference, the finding is relabeled
  ``first_call``.

The oracle reads only the outputs of the runs: how many calls Dynamo actually
reused (a graph break may split them into frames of their own) is not
known here, hence the static count and triage's re-run.
"""

from __future__ import annotations

from harness.outcome import Execution, Outcome
from harness.pipeline import region_twins
from generators.ir import Program
from generators.regions import levels, marked

from .differential import compare_runs, nondeterministic, numerics, refused
from .verdict import Status, Verdict, combine

NAME = "compile_region"
COMPANION = "region"
NEEDS = (COMPANION,)


def changed_blocks(program: Program, twin: Program) -> list[str]:
    """The blocks whose decorator the twin adds or takes away."""
    return sorted(set(marked(program)) ^ set(marked(twin)))


def level_label(program: Program, label: str) -> str:
    """``removed:level2`` or ``moved:level2->level1`` for a twin's label."""
    if label == "removed":
        depth = levels(program)
        return "removed:" + "+".join(f"level{n}" for n in sorted({depth[b] for b in marked(program)}))
    return f"moved:{label}"


def call_label(program: Program, twin: Program) -> str:
    """``first_call`` when no block the twin changes is called twice, else ``later_call``."""
    counts: dict[str, int] = {}
    for c in program.block_calls():
        counts[c.block] = counts.get(c.block, 0) + 1
    return "later_call" if any(counts.get(b, 0) > 1 for b in changed_blocks(program, twin)) else "first_call"


def _dynamo_crash(original: Execution, details: dict) -> Verdict | None:
    if original.failure is None or original.failure.stage != "dynamo":
        return None
    return Verdict(NAME, Status.INCONCLUSIVE, kind="crash", where="dynamo", details=details,
                   message=f"the original crashed in Dynamo ({original.failure.type}); the differential oracle reports it")


def _pair(original: Execution, twin: Execution, outcome: Outcome, details: dict) -> list[Verdict]:
    if (original.failure is None) != (twin.failure is None):
        side, f = ("twin", twin.failure) if twin.failure is not None else ("original", original.failure)
        if refused(outcome.program, f):  # torch refuses it on one side (a buffer donated there only)
            return [Verdict(NAME, Status.INCONCLUSIVE, kind="unsupported", where=f.stage, details=details,
                            message=f"only the {side} is refused ({details['label']}): {f.type}: {f.message}")]
        return [Verdict(NAME, Status.FAIL, kind="crash", where=f.stage,
                        message=f"only the {side} crashes ({details['label']}): {f.type}: {f.message}",
                        details={**details, "side": side, "stage": f.stage, "type": f.type, "error": f.message,
                                 "traceback": f.traceback})]
    if original.failure is not None:
        return [Verdict(NAME, Status.INCONCLUSIVE, kind="crash", where=original.failure.stage, details=details,
                        message="the original and its twin both crash")]
    if original.treespec != twin.treespec or len(original.outputs) != len(twin.outputs):
        return [Verdict(NAME, Status.FAIL, kind="structure", where="outputs", details=details,
                        message=f"output structure {original.treespec} with the decorator as drawn, "
                                f"{twin.treespec} in the twin ({details['label']})")]
    # The twin is the expectation, the original the run under judgement.
    floor = numerics(outcome)
    found = compare_runs(NAME, twin, original, outcome.reference, **floor)
    if any(v.failed for v in found) and _agrees(outcome.eager, original, outcome, floor) \
            and not _agrees(outcome.eager, twin, outcome, floor):
        # The decorated program computes what eager does; its twin does not:
        # a bug of the twin's compile (the differential oracle's, on that
        # program), not of the decorator.
        return [Verdict(NAME, Status.INCONCLUSIVE, kind="twin_wrong", details=details,
                        message=f"the twin ({details['label']}) differs from eager; the original agrees with it")]
    return [Verdict(v.oracle, v.status, v.kind, v.where, f"{details['label']}: {v.message}",
                    {**v.details, **details}) if v.status is not Status.PASS else v for v in found]


def _agrees(eager: Execution, run: Execution, outcome: Outcome, floor) -> bool:
    return not any(v.failed for v in compare_runs(NAME, eager, run, outcome.reference, **floor))


def check(outcome: Outcome) -> Verdict:
    program = outcome.program
    made = region_twins(program)
    if not made:
        return Verdict(NAME, Status.PASS, message="no nested_compile_region")
    if nondeterministic(outcome.eager, outcome.eager_again):
        return Verdict(NAME, Status.INCONCLUSIVE, kind="nondeterministic", message="eager disagrees with itself")
    # The dedup-off pairs first (when the main run deduplicates): the region
    # machinery alone, without the pass.
    sides = [(":dedup_off", "dedup_off", False), ("", None, outcome.config.dedup)] if outcome.config.dedup \
        else [("", None, False)]
    verdicts: list[Verdict] = []
    for suffix, original_name, dedup in sides:
        original = outcome.compiled if original_name is None else \
            (outcome.companions[original_name][0] if original_name in outcome.companions else None)
        for label, twin in made:
            details = {"label": f"{level_label(program, label)}:{call_label(program, twin)}",
                       "twin": label, "regions": sorted(marked(twin)), "dedup": dedup}
            if original is None:
                verdicts.append(Verdict(NAME, Status.INCONCLUSIVE, kind="not_run", details=details,
                                        message="no run of the program without deduplication"))
                continue
            key = f"{COMPANION}:{label}{suffix}"
            run = outcome.companions.get(key)
            crashed = _dynamo_crash(original, details)
            if crashed is not None:
                verdicts.append(crashed)
            elif run is None and key in outcome.spared:
                verdicts.append(Verdict(NAME, Status.PASS, details=details,
                                        message=f"twin {label} not compiled: {outcome.spared[key]}"))
            elif run is None:
                verdicts.append(Verdict(NAME, Status.INCONCLUSIVE, kind="not_run", details=details,
                                        message=f"twin {label} not compiled (companion {COMPANION!r} not run)"))
            else:
                verdicts += _pair(original, run[0], outcome, details)
    # A side whose original crashed in Dynamo is the differential oracle's
    # finding; the other side (typically without deduplication, where
    # KI-003 does not crash) is still judged.
    judged = [v for v in verdicts if not (v.status is Status.INCONCLUSIVE and v.kind == "crash" and v.where == "dynamo")]
    return combine(NAME, judged or verdicts)
