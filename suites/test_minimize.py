"""Self-tests of the IR reducer (generators.reduce) and the minimizer
(reports.minimize): every candidate is valid and smaller, the greedy search
reaches a fixpoint with just what the predicate needs, and a real finding
(KI-001) shrinks without losing its signature."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings

from generators.check import check
from generators.codegen import render
from generators.ir import Arg, Block, Call, Const, Context, Options, Program, Ref, Section, Stmt, TensorSpec
from generators.reduce import candidates, labeled_candidates, measure, size
from generators.strategies import programs
from harness.pipeline import run_program
from oracles.registry import ORACLES, run_config
from reports.minimize import fails_like, keeps_signature, minimize, minimize_finding
from reports.triage import triage

pytestmark = pytest.mark.unit

KI_001 = Path(__file__).parent.parent / "reports/known_issues/KI-001-dedup-merges-float-constants/program.json"


def _big() -> Program:
    """Two sections, five statements, an arg, an extra input, contexts and
    options: room for every kind of cut."""
    body = (
        Stmt("v0", "mul_scalar", (Ref("x"), Arg("s0"))),
        Stmt("v1", "add", (Ref("v0"), Ref("y0"))),
        Stmt("v2", "sin", (Ref("v1"),)),
        Stmt("v3", "tanh", (Ref("v2"),)),
        Stmt("v4", "relu", (Ref("v3"),)),
    )
    grad = Context(grad=True)
    program = Program(
        inputs=(("x", TensorSpec((4, 6), "float32", True)), ("y0", TensorSpec((6,), "float32", False))),
        block=Block("function", ("x", "y0"), (), (), ("s0",), body, "v4"),
        sections=(
            Section("for_values", "chain", (Call((0.5,), context=grad), Call((0.5,), context=grad),
                                            Call((2.0,), context=grad))),
            Section("nested", "chain", (Call((1.0,)), Call((3.0,))), outer=2),
        ),
        interludes=("tanh",),
        options=Options(dynamic=True),
    )
    check(program)
    return program


@settings(max_examples=30)
@given(programs())
def test_every_candidate_is_valid_smaller_and_round_trips(program):
    limit = size(program)
    for candidate in candidates(program):
        check(candidate)
        assert size(candidate) < limit
        assert Program.from_json(candidate.to_json()) == candidate
        render(candidate)  # check() does not cover everything codegen needs


def test_candidates_cover_the_big_cuts():
    kinds = {label for label, _ in labeled_candidates(_big())}
    assert {"drop_section", "halve_calls", "outer", "earlier_result", "bypass_statement", "arg_to_const",
            "interlude", "structure", "context", "requires_grad", "shape", "options"} <= kinds


def test_synthetic_predicate_reaches_a_fixpoint_with_what_it_needs():
    def needs(p: Program) -> bool:
        return any(s.op == "sin" for s in p.block.body) and len(p.repeats()) >= 2

    program = _big()
    result = minimize(program, needs)
    p = result.program
    assert result.finished and needs(p)
    assert not any(needs(c) for c in candidates(p))  # a fixpoint: no cut keeps the predicate
    assert [(s.op, s.operands) for s in p.block.body] == [("sin", (Ref("x"),))]
    assert len(p.sections) == 1 and len(p.repeats()) == 2 and p.sections[0].structure == "calls"
    assert p.inputs == (("x", TensorSpec((1, 1))),) and p.block.inputs == ("x",) and not p.block.args
    assert all(c == Call() for _, c in p.repeats()) and p.options == Options() and not p.interludes
    assert result.size_after < result.size_before == size(program) and result.accepted == len(result.steps)


@settings(max_examples=10)
@given(programs())
def test_drawn_programs_shrink_to_their_op_and_two_repeats(program):
    op = program.block.body[0].op

    def needs(p: Program) -> bool:
        return any(s.op == op for s in p.block.body) and len(p.repeats()) >= 2

    result = minimize(program, needs)
    assert result.finished and needs(result.program) and len(result.program.repeats()) == 2
    assert result.size_after <= result.size_before


def test_a_raising_predicate_counts_as_not_failing():
    def boom(p: Program) -> bool:
        raise RuntimeError("a different failure")

    program = _big()
    result = minimize(program, boom)
    assert result.program == program and result.accepted == 0 and result.finished
    assert result.tries == len(list(candidates(program)))


def test_never_grows_and_respects_budgets():
    program = _big()
    calls = []

    def flaky(p: Program) -> bool:  # raises on every other call, else says yes
        calls.append(p)
        if len(calls) % 2:
            raise ValueError("flaky")
        return True

    result = minimize(program, flaky)
    assert result.size_after <= result.size_before and size(result.program) == result.size_after
    assert result.finished
    short = minimize(program, lambda p: True, max_tries=3)
    assert short.tries == 3 and not short.finished and short.size_after < short.size_before
    late = minimize(program, lambda p: True, deadline=time.time() - 1)
    assert late.tries == 0 and late.program == program and not late.finished


def test_known_issue_001_shrinks_and_keeps_its_signature():
    program = Program.from_json(KI_001.read_text())
    config = run_config("aot_eager", ("differential",))
    outcome = run_program(program, config)
    verdict = ORACLES["differential"](outcome)
    assert verdict.failed
    signature = triage(outcome, verdict).signature
    result = minimize_finding(program, config, "differential", verdict, signature, deadline=time.time() + 60)
    small = result.program
    assert result.signature_kept and result.size_after <= result.size_before
    assert result.size_after < result.size_before, f"nothing cut: {result}"
    assert measure(small)["statements"] <= measure(program)["statements"]
    assert fails_like(config, "differential", verdict)(small)
    assert keeps_signature(config, "differential", signature)(small)
    assert Const(0.5) not in small.block.body[0].operands  # the differing float is still an argument
