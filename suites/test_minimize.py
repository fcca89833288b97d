"""Self-tests of the IR reducer (generators.reduce) and the minimizer
(campaigns.minimize): every candidate is valid and smaller, the greedy search
reaches a fixpoint with just what the predicate needs, and a real finding
(KI-001) shrinks without losing its signature."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings

from generators.check import check
from generators.codegen import render
from generators.ir import CHILD, Arg, Block, Call, Const, Context, Options, Program, Ref, Section, Stmt, TensorSpec
from generators.reduce import candidates, labeled_candidates, measure, size
from generators.strategies import programs
from harness.pipeline import run_program
from oracles.registry import ORACLES, run_config
from campaigns.minimize import fails_like, keeps_signature, minimize, minimize_finding
from reports.triage import triage
from suites.tiers import ci_profile

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
            Section("nested", "chain", (Call((1.0,)), Call((1.5,))), outer=2),
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


# Nightly since issue 42's cut to six minutes (8 s): the gate shrinks a finding and keeps its signature through a campaign's minimize
# task (test_campaign), and the reducer's cuts above
@pytest.mark.nightly
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


# --- the block hierarchy ---------------------------------------------------------


def _call(out: str, x: str, name: str, slot: int = 0) -> Stmt:
    return Stmt(out, CHILD, (Ref(x), Const(name), Const(slot)))


def _hierarchy() -> Program:
    """Three levels of module and function blocks: a decorated function
    ``gate``, a module ``proj`` with a weight and a bias, a decorated module
    ``mlp`` (two instances) calling both, and a module layer calling ``mlp``
    twice, ``proj`` and ``gate``; children held in a ModuleDict and a
    ModuleList."""
    gate = Block("function", ("x",), (), (), (),
                 (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "tanh", (Ref("v0"),))), "v1",
                 compile_region=True, name="gate")
    proj = Block("module", ("x",), (("w", TensorSpec((6, 6))), ("b", TensorSpec((6,)))), (), (),
                 (Stmt("v0", "linear", (Ref("x"), Ref("w"), Ref("b"))),), "v0", name="proj")
    mlp = Block("module", ("x",), (), (), (),
                (_call("v0", "x", "gate"), _call("v1", "v0", "proj"), Stmt("v2", "relu", (Ref("v1"),))), "v2",
                compile_region=True, name="mlp", holder="module_list")
    layer = Block("module", ("x",), (("w0", TensorSpec((6, 6))), ("b0", TensorSpec((6,)))), (), (),
                  (_call("v0", "x", "mlp"), _call("v1", "v0", "mlp", 1), _call("v2", "v1", "proj"),
                   Stmt("v3", "linear", (Ref("v2"), Ref("w0"), Ref("b0"))), _call("v4", "v3", "gate")), "v4",
                  holder="module_dict")
    program = Program(
        inputs=(("x", TensorSpec((4, 6), "float32", True)),),
        block=layer,
        sections=(Section("calls", "chain", (Call(), Call())),),
        subs=(gate, proj, mlp),
    )
    check(program)
    assert program.depth() == 3
    return program


def _nested_regions(gate_in_layer: bool = True) -> Program:
    """A decorated function layer calling a decorated ``mlp`` twice, which
    calls ``gate`` (which the layer calls too, when ``gate_in_layer``): what
    the planted nested-region fault needs, and more."""
    gate = Block("function", ("x",), (), (), (), (Stmt("v0", "cos", (Ref("x"),)),), "v0", name="gate")
    mlp = Block("function", ("x",), (), (), (),
                (Stmt("v0", "sin", (Ref("x"),)), _call("v1", "v0", "gate"), Stmt("v2", "neg", (Ref("v1"),))), "v2",
                compile_region=True, name="mlp")
    last = _call("v3", "v2", "gate") if gate_in_layer else Stmt("v3", "tanh", (Ref("v2"),))
    layer = Block("function", ("x",), (), (), (),
                  (Stmt("v0", "abs", (Ref("x"),)), _call("v1", "v0", "mlp"), _call("v2", "v1", "mlp"), last), "v3",
                  compile_region=True)
    program = Program(inputs=(("x", TensorSpec((3, 5)),),), block=layer,
                      sections=(Section("for_range", "chain", (Call(), Call(), Call())),), subs=(mlp, gate))
    check(program)
    return program


HIERARCHY_CUTS = {"drop_block", "inline_block", "flatten_block", "flatten_all"}


def _valid(candidate: Program) -> None:
    check(candidate)  # every sub-block called, types follow the bodies
    called = {n for b in candidate.blocks() for n, _ in b.children()}
    assert {sb.name for sb in candidate.subs} == called
    assert Program.from_json(candidate.to_json()) == candidate
    render(candidate)


@pytest.mark.parametrize("make", [_hierarchy, _nested_regions])
def test_hierarchy_cuts_are_valid_renderable_and_smaller(make):
    program = make()
    limit = size(program)
    labels = set()
    for label, candidate in labeled_candidates(program):
        _valid(candidate)
        assert size(candidate) < limit
        labels.add(label)
    assert {"drop_block", "flatten_block", "flatten_all", "compile_region", "bypass_statement", "shape"} <= labels
    # _hierarchy's sub-blocks are each called twice or more: inlining one call
    # of one would make the program bigger; _nested_regions' gate is called once
    assert ("holder" if make is _hierarchy else "inline_block") in labels


def test_hierarchy_cuts_come_before_statement_cuts_biggest_first():
    cuts = list(labeled_candidates(_hierarchy()))
    labels = [label for label, _ in cuts]
    first_statement_cut = min(labels.index(k) for k in ("earlier_result", "dead_code", "bypass_statement") if k in labels)
    assert all(labels.index(k) < first_statement_cut for k in HIERARCHY_CUTS if k in labels)
    sizes = [size(c) for label, c in cuts if label in HIERARCHY_CUTS]
    assert sizes == sorted(sizes) and labels[labels.index("halve_calls") + 1] == "flatten_all"


def _sub_ops(program: Program, name: str):
    """The ops of sub-block ``name``'s body, None if the program has none."""
    return next(([s.op for s in sb.body] for sb in program.subs if sb.name == name), None)


def _by_label(program: Program, label: str) -> list[Program]:
    return [c for lab, c in labeled_candidates(program) if lab == label]


def test_flatten_all_moves_every_instance_s_weights_into_the_layer():
    program = _hierarchy()
    (flat,) = _by_label(program, "flatten_all")
    assert not flat.subs and flat.depth() == 1 and CHILD not in {s.op for s in flat.block.body}
    # proj's weight and bias once per instance: mlp 0's, mlp 1's and the layer's own
    weights = [n for n, _ in flat.block.weights]
    assert len(weights) == 2 + 3 * 2 and len(set(weights)) == len(weights)
    ops = [s.op for s in flat.block.body]
    assert ops == ["sin", "tanh", "linear", "relu"] * 2 + ["linear", "linear", "sin", "tanh"]
    assert flat.block.result == "v4"  # the inlined result keeps the call's name


def test_flatten_one_block_keeps_the_levels_around_it():
    program = _hierarchy()
    flats = _by_label(program, "flatten_block")
    # mlp flattened into the layer: gate and proj now called from the layer (proj on fresh slots)
    flat = next(c for c in flats if "mlp" not in {sb.name for sb in c.subs})
    assert {sb.name for sb in flat.subs} == {"gate", "proj"} and flat.depth() == 2
    assert sorted(k for n, k in flat.block.children() if n == "proj") == [0, 1, 2]
    # gate flattened everywhere: a function inlined into module and function callers
    flat = next(c for c in flats if "gate" not in {sb.name for sb in c.subs})
    assert [s.op for s in flat.sub("mlp").body] == ["sin", "tanh", CHILD, "relu"]


def test_inline_one_call_and_drop_one_call():
    program = _nested_regions()
    # gate (one statement) called from mlp and from the layer: either call inlined alone
    inlined = _by_label(program, "inline_block")
    assert [s.op for s in inlined[0].block.body] == ["abs", CHILD, CHILD, "cos"] or \
        [s.op for s in inlined[0].sub("mlp").body] == ["sin", "cos", "neg"]
    assert len(inlined) == 2 and all(c.sub("gate") for c in inlined)
    # the layer's first mlp call dropped: the second reads abs's value
    dropped = _by_label(program, "drop_block")
    layer_ops = [[(s.op, s.operands[0]) for s in c.block.body] for c in dropped]
    assert [("abs", Ref("x")), (CHILD, Ref("v0")), (CHILD, Ref("v2"))] in layer_ops
    # with gate called from mlp alone, dropping that call drops gate too
    program = _nested_regions(gate_in_layer=False)
    gone = [c for c in _by_label(program, "drop_block") if len(c.block.body) == 4]
    assert [s.op for s in gone[0].sub("mlp").body] == ["sin", "neg"] and not any(sb.name == "gate" for sb in gone[0].subs)
    # and inlining it is flattening it
    (flat,) = [c for c in candidates(program) if _sub_ops(c, "mlp") == ["sin", "cos", "neg"]]
    assert [sb.name for sb in flat.subs] == ["mlp"]


def test_inlining_weights_into_a_function_block_is_skipped():
    from generators.reduce import _inline

    program = _hierarchy()
    layer = replace(program.block, kind="function", holder="attr")  # check would refuse this program
    assert _inline(replace(program, block=layer), "", {2}) is None  # proj owns a weight and a bias


def test_body_cuts_reach_inside_sub_blocks():
    program = _nested_regions()
    mlp_bodies = {tuple(_sub_ops(c, "mlp") or ()) for c in candidates(program)}
    assert {("sin", CHILD), ("sin", "neg")} <= mlp_bodies  # cut inside mlp: an earlier result, a bypass
    shapes = [c for lab, c in labeled_candidates(_hierarchy()) if lab == "shape"]
    assert shapes and all(c.sub("proj").weights[0][1].shape[-1] == c.inputs[0][1].shape[-1] for c in shapes)


def test_nested_regions_minimize_to_two_blocks():
    def needs(p: Program) -> bool:  # a decorated block calling a decorated block twice, run twice
        return len(p.repeats()) >= 2 and any(
            b.compile_region and sum(p.sub(n).compile_region for n, _ in b.children()) >= 2 for b in p.blocks()
        )

    result = minimize(_nested_regions(), needs)
    p = result.program
    assert result.finished and needs(p)
    assert len(p.blocks()) == 2 and p.depth() == 2, render(p)
    assert [s.op for s in p.block.body] == [CHILD, CHILD] and len(p.sub("mlp").body) == 1, render(p)


# 10 hierarchies in the gate (50 until issue 42's cut to six minutes: 21 s on a machine whose bare loop is
# 0.34 s a program), the profile's count in the nightly tier
@pytest.mark.long(seconds=12)
@settings(max_examples=10 if ci_profile() else settings.default.max_examples)
@given(programs().filter(lambda p: bool(p.subs)))
def test_drawn_hierarchies_reduce_without_raising(program):
    limit = size(program)
    for candidate in candidates(program):
        _valid(candidate)
        assert size(candidate) < limit
    depth = program.depth()

    def needs(p: Program) -> bool:  # keep the hierarchy as deep as drawn: the cuts inside it run
        return p.depth() == depth and len(p.repeats()) >= 2

    result = minimize(program, needs, max_tries=200)
    assert needs(result.program) and result.size_after <= result.size_before
    _valid(result.program)
