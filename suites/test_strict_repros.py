"""Crash repros are strict: exit 1 only for the failure the finding is (its
exception type and normalized message), 3 when the program fails another
way, so ``git bisect run`` stops at the commit that changed *this* failure."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import differential
from reports.known_issues import load
from reports.repro import render_repro
from reports.signature import normalize
from reports.triage import triage
from campaigns.worker import expected_crash

from .planted_pass import render_planted
from harness import warm

pytestmark = pytest.mark.unit

ISSUES = {i.id: i for i in load()}
ROOT = Path(__file__).parent.parent


def _run(tmp_path, program, backend: str, check: str, name: str = "repro.py", *args, **kwargs):
    """A rendered repro, run standalone from the repository root (where a planted backend imports)."""
    path = tmp_path / name
    path.write_text(render_planted(program, backend, check, *args, **kwargs))
    return warm.run([str(path)], timeout=300, cwd=str(ROOT))


def _exit(issue_id: str, expect: str | None, tmp_path, check: str = "") -> int:
    issue = ISSUES[issue_id]
    path = tmp_path / "repro.py"
    path.write_text(render_repro(issue.program(), RunConfig(backend=issue.backend, dedup=issue.dedup), issue_id,
                                 check or issue.repro, issue.variant, expect_crash=expect))
    return warm.run([str(path)], timeout=300).returncode


def test_a_crash_repro_exits_1_only_for_its_own_crash(tmp_path):
    issue = ISSUES["KI-003"]  # a nested_compile_region called twice crashes the pass: KeyError: 'example_value'
    outcome = run_program(issue.program(), RunConfig(backend=issue.backend, dedup=issue.dedup))
    verdict = differential.check(outcome)
    assert verdict.kind == "crash", verdict
    own = expected_crash(triage(outcome, verdict))
    assert fnmatch.fnmatchcase(normalize(verdict.message), own)
    assert _exit("KI-003", own, tmp_path) == 1
    assert _exit("KI-003", "", tmp_path) == 3  # a wrong-value finding that now crashes: fails differently


def test_a_wrong_value_repro_that_runs_without_its_crash_fails_differently(tmp_path):
    assert _exit("KI-027", "", tmp_path) == 1  # wrong values, as the finding says
    assert _exit("KI-027", "KeyError: example_value", tmp_path) == 3


def test_a_guard_repro_is_strict_about_the_crash_after_the_change(tmp_path):
    issue = ISSUES["KI-018"]  # the call after a change crashes: lift_tracked_freevar_to_input ... root SubgraphTracer
    assert issue.repro == "guard" and issue.expect_crash
    assert _exit("KI-018", issue.expect_crash, tmp_path) == 1
    assert _exit("KI-018", "AssertionError: Freevar has no source", tmp_path) == 3  # its 2.15 form


def test_a_regions_repro_sees_a_plain_op_moved_out_of_its_grad_mode(tmp_path):
    # the pass moves a grad-mode switch: v0, an op outside any subgraph call,
    # now runs with grad; the oracle sees it, and the repro only looked at
    # subgraph calls (a graph_validity:ambient finding whose repro exited 0)
    import suites.test_structural_oracles as structural

    done = _run(tmp_path, structural.FIRST_NO_GRAD, "suites.planted_pass:grad_mode_moved__aot_eager", "regions")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "v0" in done.stdout
    assert _run(tmp_path, structural.FIRST_NO_GRAD, "aot_eager", "regions", "honest.py").returncode == 0


def test_a_regions_repro_replays_inference_mode_like_the_oracle(tmp_path):
    # the oracle replays inference_mode nodes as grad off; the repro did not,
    # found the graph before the pass "unmodelled" and judged nothing: a
    # graph_validity:ambient finding (KI-011, seen on torch 2.15) exiting 0
    from generators.ir import Block, Call, Const, Context, Program, Ref, Section, Stmt, TensorSpec

    body = (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "log_softmax", (Ref("v0"), Const(-1))))
    program = Program(
        (("x", TensorSpec((3, 4), "float32", True)),),
        Block("module", ("x",), (), (), (), body, "v1"),
        (Section("calls", "fanout", (Call(context=Context(inference=True)),) * 2, interleave="tanh"),
         Section("calls", "fanout", (Call(tensor="x", context=Context(autocast=True)),) * 2)),
        interludes=(None,), outputs="dict",
    )
    done = _run(tmp_path, program, "aot_eager", "regions")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_crash_repro_whose_crash_is_gone_and_values_are_right_is_not_reproduced(tmp_path):
    # a fixed crash must read "fixed" to bisect and to regress: exit 0, not 3
    from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec

    program = Program((("x", TensorSpec((3, 4), "float32", True)),),
                      Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),)),), "v0"),
                      (Section("calls", "chain", (Call(), Call())),))
    done = _run(tmp_path, program, "aot_eager", "differential", expect_crash="InternalTorchDynamoError: KeyError: example_value")
    assert done.returncode == 0, done.stdout[-2000:]


def test_a_repro_that_fails_before_its_check_exits_2_not_1(tmp_path):
    # torch 2.7 has no nested_compile_region: the program's decorator raised
    # at import and Python exited 1, which read as "reproduced"
    issue = ISSUES["KI-003"]
    text = issue.render().replace("@torch.compiler.nested_compile_region", "@torch.compiler.no_such_decorator", 1)
    assert "no_such_decorator" in text
    path = tmp_path / "repro.py"
    path.write_text(text)
    done = warm.run([str(path)], timeout=300)
    assert done.returncode == 2 and "ERROR: the repro itself failed" in done.stdout, (done.returncode, done.stdout[-500:])


# Nightly since issue 42's cut to six minutes (5 s): a lost worker's repro runs standalone in the gate's aborting-and-hanging campaign
# (test_campaign: its repro exits 1)
@pytest.mark.nightly
def test_a_lost_worker_repro_goes_on_to_the_run_without_the_pass_as_the_worker_did(tmp_path):
    # the worker died in its dedup-off companion run; the repro's child ran the
    # main run only, met KI-003's KeyError there and exited 2 (a flaky
    # "campaign survives an aborting backend" test)
    issue = ISSUES["KI-003"]  # a nested_compile_region called twice: the pass crashes, the region alone does not
    done = _run(tmp_path, issue.program(), "suites.planted:abort_on_subgraph_calls", "process", "repro.py", None,
                {"kind": "signal", "timeout": 60, "memory_mb": 8192})
    assert done.returncode == 1 and "died by signal 6" in done.stdout, done.stdout[-2000:]


def test_a_regions_repro_lints_what_the_backend_receives(tmp_path):
    # graph_validity:lint / cycle findings (torch 2.7's KI-034: an output naming
    # an erased node) had a regions repro that never linted: exit 0
    import suites.test_structural_oracles as structural

    done = _run(tmp_path, structural.CHAIN, "suites.planted_pass:cyclic_edge__aot_eager", "regions")
    assert done.returncode == 1 and "graph.lint()" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def _no_grad_blocks(floats):
    """KI-004 (the pass drops no_grad around the subgraph call: graph_validity)
    and, with two floats, KI-001 (the tracker merges regions differing in a
    float constant: region_identity) in one program."""
    from generators.ir import Arg, Call, Const, Context, Ref, TensorSpec

    from .test_structural_oracles import _program, _stmts

    body = _stmts(("v0", "sigmoid", (Ref("x"),)), ("v1", "rsub_scalar", (Ref("v0"), Arg("s0"))),
                  ("v2", "softplus", (Ref("v1"), Const(1.0))), ("v3", "add", (Ref("x"), Ref("v2"))))
    return _program(body=body, inputs=(("x", TensorSpec((3, 2), "float32", True)),), args=("s0",), result="v3",
                    calls=tuple(Call(args=(f,), context=Context(grad=False)) for f in floats), structure="for_values")


def test_structural_repros_name_only_their_own_difference(tmp_path):
    """A program meeting two recorded issues: the region-identity repro
    (KI-001's float) and the graph-validity repro (KI-004's grad mode) each
    exit 1; once the floats are equal, the region-identity repro sees only
    KI-004's difference and exits 3. A planted int fault beside KI-001's
    float: exit 1 for the int."""
    from reports.repro import regions_expectation

    from . import planted_pass
    from .test_structural_oracles import FLOAT_AND_INT

    both, one = _no_grad_blocks((1.0, -0.5)), _no_grad_blocks((1.0, 1.0))
    grad = regions_expectation("graph_validity", "ambient:grad:region")
    flt = regions_expectation("region_identity", "constant:float")
    integer = regions_expectation("region_identity", "constant:int")
    runs = {  # name: (program, backend, EXPECT, exit status)
        "both-float": (both, "aot_eager", flt, 1), "both-grad": (both, "aot_eager", grad, 1),
        "one-float": (one, "aot_eager", flt, 3),
        "planted-int": (FLOAT_AND_INT, "suites.planted_pass:ints_ignored__aot_eager", integer, 1),
    }
    for name, (program, backend, expect, status) in runs.items():
        path = tmp_path / f"{name}.py"
        path.write_text(planted_pass.render_planted(program, backend, "regions", expect_difference=expect))
        done = warm.run([str(path)], cwd=str(ROOT), timeout=300)
        assert done.returncode == status, (name, done.returncode, (done.stdout + done.stderr)[-3000:])
    assert flt == "region_identity:constant:float" and grad == "graph_validity:ambient:grad:region"
    assert regions_expectation("graph_validity", "ambient:grad:switch") == "graph_validity:ambient:grad:op"
    # a cycle or a broken order of the oracle's own orderings (which the pass's lint cannot see): the repro
    # judges them itself, with the oracle's code
    assert regions_expectation("graph_validity", "cycle:inference") == "graph_validity:cycle:inference"
    assert regions_expectation("graph_validity", "order:mutation:op") == "graph_validity:order:mutation:op"


def test_a_regions_repro_judges_the_order_the_pass_must_keep_as_the_oracle_does(tmp_path):
    # a seed-51 campaign's cycle of writes and reads (KI-008's face) had a regions repro that could only lint: exit 0
    from reports.repro import regions_expectation

    import suites.test_structural_oracles as structural

    expect = regions_expectation("graph_validity", "order:mutation:op:grouped")
    done = _run(tmp_path, structural.MUTATES_INPUT, "suites.planted_pass:mutation_reordered__aot_eager", "regions",
                expect_difference=expect)
    assert done.returncode == 1 and "[graph_validity:order:mutation" in done.stdout, done.stdout[-2000:]
    honest = _run(tmp_path, structural.MUTATES_INPUT, "aot_eager", "regions", "honest.py", expect_difference=expect)
    assert honest.returncode == 0, honest.stdout[-2000:]


def test_a_toggle_repro_tells_wrong_values_from_a_crash(tmp_path):
    # KI-020: dedup on vs off differ in value; a finding that was a crash
    # with deduplication (expected "*") fails differently here
    assert ISSUES["KI-020"].expect_crash == ""
    assert _exit("KI-020", "*", tmp_path) == 3


def test_a_guard_finding_records_the_changes_before_it_and_its_repro_replays_them(tmp_path):
    """The changes the harness made earlier in the same process that
    recompiled are the history a stale or wrong entry may need (KI-040: a
    float made dynamic by an earlier change); the finding carries them in
    order, and its repro makes them before its own change."""
    from harness.pipeline import run_program
    from oracles import guards
    from reports.repro import driver_for

    issue = ISSUES["KI-040"]
    outcome = run_program(issue.program(), RunConfig(backend="aot_eager", dedup=False, variants=20))
    runs = outcome.capture.variants
    verdict = guards.check(outcome)
    assert verdict.failed and verdict.details["variant"]["kind"] == "free:global:sign", verdict
    at = next(i for i, r in enumerate(runs) if r.variant == verdict.details["variant"])
    history = [(list(r.variant["apply"]), list(r.variant["undo"])) for r in runs[:at] if r.recompiled]
    assert history and verdict.details["before"] == history, verdict.details["before"]
    check, variant = driver_for(verdict.details, "wrong", verdict.oracle, verdict.kind)
    text = render_repro(issue.program(), RunConfig(backend="aot_eager", dedup=False), "history", check, variant,
                        expect_crash="")
    joined = [("\n".join(a), "\n".join(u)) for a, u in history]
    assert f"BEFORE = {joined!r}" in text
    path = tmp_path / "repro.py"
    path.write_text(text)
    done = warm.run([str(path)], timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_float64_program_s_repro_judges_at_float64_s_tolerance(tmp_path):
    """A campaign (seed 19) found gelu(approximate='tanh') and 'none' merged
    (KI-001's string case) in a float64 program: 1.8e-05 off, far beyond
    float64's tolerance, which the oracle uses; the repro judged every
    program at float32's 1e-4 and exited 0 (an unconfirmed finding)."""
    from generators.ir import Program

    program = Program.from_json((ROOT / "suites" / "data" / "float64_gelu_approximate.json").read_text())
    text = render_repro(program, RunConfig(backend="aot_eager"), "float64", "differential", expect_crash="")
    assert "ATOL = RTOL = 1e-07" in text
    path = tmp_path / "repro.py"
    path.write_text(text)
    done = warm.run([str(path)], timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_rewrite_finding_reproduces_where_the_backend_meets_a_known_crash(tmp_path):
    """A campaign (issue 43's seed 1) found the pass merging a class
    attribute's float (KI-001) in a program calling the block on a tensor
    subclass, where aot_eager then crashes (KI-054's NotImplementedType): the
    rewrite oracle runs Dynamo's graphs as they are, the toggle repro compiled
    with the backend and exited 3 (unconfirmed). A rewrite finding's repro runs
    the pass alone, on the eager backend, forward only unless a gradient differs."""
    from generators.ir import Program
    from oracles import rewrite
    from reports.repro import driver_for

    program = Program.from_json((ROOT / "suites" / "data" / "rewrite_behind_subclass_crash.json").read_text())
    outcome = run_program(program, RunConfig(backend="aot_eager", dedup=True, companions=("dedup_off",)))
    verdict = rewrite.check(outcome)
    assert verdict.failed and verdict.kind == "mismatch", verdict
    check, variant = driver_for(verdict.details, "wrong", verdict.oracle, verdict.kind)
    assert (check, variant) == ("rewrite", {"gradient": False}), (check, variant)
    path = tmp_path / "repro.py"
    path.write_text(render_repro(program, RunConfig(backend="aot_eager", dedup=True), "rewrite", check, variant,
                                 expect_crash=""))
    done = warm.run([str(path)], timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "BACKEND = 'eager'" in path.read_text()


def test_a_regions_repro_sees_a_region_writing_a_view_of_its_input_as_the_oracle_does(tmp_path):
    """Seed 91: the pass made a subgraph of `y0[..., :1].add_(1.0)` (the view made inside the region, written
    through); the oracle (harness.structure.region_hazards) called it an input mutation (KI-008) but the
    repro's own hand copy saw only writes to a placeholder and exited 0 (unconfirmed). It embeds the oracle's
    reading now."""
    from generators.ir import Program
    from reports.repro import regions_expectation

    program = Program.from_json((ROOT / "suites" / "data" / "region_writes_a_view_of_its_input.json").read_text())
    expect = regions_expectation("graph_validity", "subgraph_input_mutation:untracked:mutation:compile_region")
    done = _run(tmp_path, program, "aot_eager", "regions", expect_difference=expect)
    assert done.returncode == 1 and "writes to its inputs: add_" in done.stdout, done.stdout[-2000:]


def test_a_structural_repro_runs_the_program_under_its_own_autograd_context(tmp_path):
    """Seed 97: a global forward hook records `value.detach().clone()`, which Dynamo traces, and the calls under
    inference_mode make the pass group them (KI-004); the regions repro compiled without the program's autograd
    context, traced no hook, found no group and exited 0 (unconfirmed). Every structural driver enters it now."""
    from generators.ir import Program
    from reports.repro import regions_expectation

    program = Program.from_json((ROOT / "suites" / "data" / "regions_of_a_global_forward_hook.json").read_text())
    assert program.options.autograd == ("module.global_forward",)
    expect = regions_expectation("graph_validity", "ambient:grad:region")
    done = _run(tmp_path, program, "aot_eager", "regions", expect_difference=expect)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_rewrite_repro_compares_the_writes_a_run_records(tmp_path):
    """Seed 97: the runs record 'y0 written by the forward' (a fact, not a tensor); the rewrite driver compared
    every value as a tensor and exited 2 (the repro's own error) on KI-001's float merge."""
    from generators.ir import Program

    program = Program.from_json((ROOT / "suites" / "data" / "rewrite_of_a_program_writing_its_input.json").read_text())
    done = _run(tmp_path, program, "aot_eager", "rewrite", "repro.py", {"gradient": False})
    assert done.returncode == 1 and "output[2]" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_missed_merge_repro_counts_the_ops_of_a_helper_the_block_calls(tmp_path):
    """Seed 99: block(x) calls block_mlp (one mish) three times, one call dead; the dead and the live mish share a
    key (KI-014's crowded bucket). The repro counted a node as the block's only where the innermost line of the
    script in its stack lay in block's own lines, which a helper's op never does: it exited 0 (unconfirmed)."""
    from generators.ir import Program

    program = Program.from_json((ROOT / "suites" / "data" / "crowded_in_a_helper_of_the_block.json").read_text())
    done = _run(tmp_path, program, "aot_eager", "deduplicated")
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
