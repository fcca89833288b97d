"""The region-reuse oracle (oracles.region_reuse): a nested_compile_region body re-traced in its frame
without a reason Dynamo logs is a finding. Planted fault: a mutant of torch's own source
(campaigns.torch_mutants) that turns reuse off (``reuse = not tx.output.export`` -> ``reuse = tx.output.export``):
the outputs stay right (Dynamo installs an identical body under the same identifier), only the log of
cache hits is gone. The oracle fires on it and passes on torch as installed; so does the repro.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given, settings

from campaigns import torch_mutants as tm
from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec
from generators.regions import marked
from generators.strategies import programs
from harness import warm
from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import region_reuse
from oracles.registry import ORACLES, run_config
from reports.known_issues import match
from reports.repro import driver_for, render_repro
from reports.triage import known_issue, triage
from suites.test_torch_mutants import _line

INVOKE = "torch._dynamo.variables.invoke_subgraph"
BLOCK = Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "tanh", (Ref("v0"),))),
              "v1", compile_region=True)
PROGRAM = Program(inputs=(("x", TensorSpec((3, 4), "float32", True)),), block=BLOCK,
                  sections=(Section("calls", "chain", (Call(), Call(), Call())),))


def _reuse_off() -> tm.Site:
    line = _line(INVOKE, "reuse = not tx.output.export")
    return next(s for s in tm.sites((INVOKE,)) if s.line == line and s.kind == "not")


def _outcome(dedup: bool = True):
    return run_program(PROGRAM, run_config("aot_eager", (region_reuse.NAME,), dedup=dedup))


def test_registered_as_a_missed_optimization_judged_without_the_pass():
    oracle = ORACLES[region_reuse.NAME]
    assert oracle.severity == "missed" and oracle.needs == ("dedup_off",)


@pytest.mark.parametrize("dedup", [True, pytest.param(False, marks=pytest.mark.nightly)])  # the gate: the companion
def test_the_oracle_fires_on_reuse_turned_off_in_torch_and_passes_on_torch_as_installed(dedup):
    verdict = region_reuse.check(_outcome(dedup))
    assert verdict.status.value == "pass", verdict
    with tm.applied(_reuse_off()):
        outcome = _outcome(dedup)
    verdict = region_reuse.check(outcome)
    assert verdict.failed and verdict.kind == "missed" and verdict.details["again"] == 2, verdict
    judged = outcome.companions["dedup_off"][0] if dedup else outcome.compiled  # (with the pass on: KI-003)
    assert judged.failure is None  # the run the oracle judged got through: only the reuse is lost
    assert triage(outcome, verdict).signature.startswith("region_reuse:missed:compile_region:reuse:missed")


def test_a_symbolic_argument_or_a_programs_own_key_is_not_judged():
    assert region_reuse._again(["subgraph_0", "subgraph_0|sym", "subgraph_1", "subgraph_0"]) == 1
    hashed = Program(inputs=PROGRAM.inputs, block=BLOCK.__class__(**{**BLOCK.__dict__, "reuse": "hash"}),
                     sections=PROGRAM.sections)
    with tm.applied(_reuse_off()):
        verdict = region_reuse.check(run_program(hashed, run_config("aot_eager", (region_reuse.NAME,))))
    assert verdict.status.value == "pass" and "reuse_hash_fn" in verdict.message


def test_the_repro_exits_1_under_the_mutant_and_0_on_torch_as_installed(tmp_path):
    with tm.applied(_reuse_off()):
        outcome = _outcome()
    verdict = region_reuse.check(outcome)
    check, variant = driver_for(verdict.details, "missed", verdict.oracle, verdict.kind)
    assert check == "reuse"
    repro = tmp_path / "repro.py"
    repro.write_text(render_repro(PROGRAM, outcome.config, "region_reuse:missed", check, variant))
    site = _reuse_off()
    under = (f"import runpy, sys; sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r}); "
             f"from campaigns import torch_mutants as tm; tm.apply(tm.parse({site.name + '__aot_eager'!r})[0]); "
             f"runpy.run_path({str(repro)!r}, run_name='__main__')")
    runs = {name: warm.run(args, cwd=str(tmp_path), timeout=300)
            for name, args in (("clean", [str(repro)]), ("mutant", ["-c", under]))}
    assert runs["clean"].returncode == 0, runs["clean"].stdout + runs["clean"].stderr
    assert runs["mutant"].returncode == 1, runs["mutant"].stdout + runs["mutant"].stderr


@pytest.mark.nightly
@settings(max_examples=max(10, settings.default.max_examples // 5))
@given(programs().filter(lambda p: bool(marked(p))))
def test_no_false_alarm_on_drawn_programs_with_a_decorated_block(program):
    """Deduplication off, aot_eager, torch as installed: a failure must be a known torch issue."""
    outcome = run_program(program, RunConfig(backend="aot_eager", dedup=False, record_structure=False))
    verdict = region_reuse.check(outcome)
    if not verdict.failed:
        return
    finding = triage(outcome, verdict)
    assume(known_issue(finding) is None and match(finding.signature) is None)
    check, variant = driver_for(verdict.details, "missed", verdict.oracle, verdict.kind)
    raise AssertionError(f"new finding {finding.signature}\n{verdict}\n\nprogram.json: {program.to_json()}\n\n"
                         f"repro.py:\n{render_repro(program, outcome.config, finding.signature, check, variant)}")
