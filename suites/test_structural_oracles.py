"""Structural oracles against planted faults in the real pass, and against the
honest pass on the same programs (so each firing is the fault's doing)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from generators.ir import Arg, Block, Call, Const, Context, Options, Program, Ref, Section, Stmt, TensorSpec
from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import completeness, dedup_toggle, determinism, graph_validity, region_identity, rewrite
from oracles.registry import ORACLES
from oracles.verdict import Status

from . import planted_pass

pytestmark = pytest.mark.unit


def _stmts(*rows):
    return tuple(Stmt(out, op, operands) for out, op, operands in rows)


SIN_TANH = _stmts(("v0", "sin", (Ref("x"),)), ("v1", "tanh", (Ref("v0"),)))


def _program(body=SIN_TANH, calls=(Call(), Call()), inputs=(("x", TensorSpec((3, 4), "float32", True)),),
             block_inputs=("x",), args=(), structure="calls", flow="chain", result="v1", outputs="single"):
    return Program(
        inputs=inputs,
        block=Block("function", block_inputs, (), (), args, body, result),
        sections=(Section(structure, flow, tuple(calls)),),
        outputs=outputs,
        options=Options(fullgraph=True),
    )


CHAIN = _program()
CHAIN3 = _program(calls=(Call(), Call(), Call()), inputs=(("x", TensorSpec((3, 4)),),))
INT_ARG = _program(
    body=_stmts(("v0", "sin", (Ref("x"),)), ("v1", "sum", (Ref("v0"), Arg("s0"), Const(True)))),
    inputs=(("x", TensorSpec((3, 3)),),), args=("s0",), calls=(Call(args=(-1,)), Call(args=(-2,))),
    structure="for_values", flow="fanout", outputs="tuple",
)
GRAD_MODES = _program(inputs=(("x", TensorSpec((3, 4)),),), flow="fanout", outputs="tuple",
                      calls=(Call(context=Context(grad=False)), Call(context=Context(grad=True))))
# Only the two calls with grad are merged, and their subgraph calls land where grad is on.
FIRST_NO_GRAD = _program(inputs=(("x", TensorSpec((3, 4)),),), flow="fanout", outputs="tuple",
                         calls=(Call(context=Context(grad=False)), Call(context=Context(grad=True)),
                                Call(context=Context(grad=True))))
TWO_SHAPES = _program(inputs=(("x", TensorSpec((3, 4)),), ("t0", TensorSpec((2, 5)))), flow="fanout",
                      outputs="tuple", calls=(Call(tensor="x"), Call(tensor="t0")))
TWO_INPUTS = _program(
    body=_stmts(("v0", "sin", (Ref("x"),)), ("v1", "mul", (Ref("v0"), Ref("y0"))), ("v2", "cos", (Ref("v1"),))),
    inputs=(("x", TensorSpec((3, 4)),), ("y0", TensorSpec((3, 4)))), block_inputs=("x", "y0"), result="v2",
)
# Every call in a bracket of its own, all under the same autocast state (no region merged across states: not KI-011).
AUTOCAST_EACH = _program(inputs=(("x", TensorSpec((3, 4)),),), flow="fanout", outputs="tuple",
                         calls=(Call(context=Context(autocast=True)),) * 3)
MUTATES_INPUT = _program(
    body=_stmts(("v0", "mul_", (Ref("y0"), Const(2.0))), ("v1", "add", (Ref("x"), Ref("v0"))), ("v2", "sin", (Ref("v1"),))),
    inputs=(("x", TensorSpec((3, 4)),), ("y0", TensorSpec((3, 4)))), block_inputs=("x", "y0"), result="v2",
)


def _judge(name: str, program: Program, plant=contextlib.nullcontext, backend: str = "aot_eager"):
    oracle = ORACLES[name]
    with plant():
        outcome = run_program(program, RunConfig(backend=backend, companions=oracle.needs))
    return oracle(outcome)


def _recaptured(program: Program) -> Program:
    """The program under a seed in the second capture's sample (harness.pipeline.RECAPTURE_EVERY)."""
    from harness.pipeline import RECAPTURE_EVERY
    from harness.sample import in_sample

    return next(replace(program, seed=s) for s in range(100) if in_sample(replace(program, seed=s), RECAPTURE_EVERY, "recapture"))


CHAIN_RECAPTURED = _recaptured(CHAIN)

PLANTED = [
    # (oracle, planted fault, program, expected kind, expected label prefix, words the message must hold)
    (region_identity.NAME, planted_pass.ints_ignored, INT_ARG, "constant", "constant:int", ["v1", "int -1", "int -2"]),
    (region_identity.NAME, planted_pass.grad_mode_ignored, GRAD_MODES, "ambient", "ambient:grad", ["grad=False"]),
    (region_identity.NAME, planted_pass.tensor_metadata_ignored, TWO_SHAPES, "input", "input:shape", ["shape"]),
    (rewrite.NAME, planted_pass.arguments_swapped, TWO_INPUTS, "mismatch", None, ["output[0]"]),
    (graph_validity.NAME, planted_pass.cyclic_edge, CHAIN, "cycle", "cycle", ["invoke_subgraph"]),
    (graph_validity.NAME, planted_pass.grad_mode_moved, FIRST_NO_GRAD, "ambient", "ambient:grad", ["grad=True", "v0"]),
    (graph_validity.NAME, planted_pass.mutation_reordered, MUTATES_INPUT, "order", "order:mutation", ["(mul_)", "writes"]),
    (graph_validity.NAME, planted_pass.mutation_check_skipped, MUTATES_INPUT, "subgraph_input_mutation", None, ["writes"]),
    (graph_validity.NAME, planted_pass.autocast_order_dropped, AUTOCAST_EACH, "ambient", "ambient:autocast",
     ["autocast_cpu=None", "bfloat16"]),
    (completeness.NAME, planted_pass.regions_dropped, CHAIN, "missed_merge", "missed:static", ["repeat 0"]),
    (determinism.NAME, planted_pass.regions_flaky, CHAIN_RECAPTURED, "region_groups", None, ["differ"]),
    (dedup_toggle.NAME, planted_pass.extra_guard, CHAIN, "guards", "guards", ["ID_MATCH", "nn"]),
]


@pytest.mark.parametrize("oracle, plant, program, kind, label, words", PLANTED,
                         ids=[f"{p[0]}-{p[1].__name__}" for p in PLANTED])
def test_planted_fault_is_named(oracle, plant, program, kind, label, words):
    verdict = _judge(oracle, program, plant)
    assert verdict.failed, verdict
    assert verdict.kind == kind, verdict
    if label:
        assert verdict.details["label"].startswith(label), verdict.details
    for word in words:
        assert word in str(verdict), (word, str(verdict))


@pytest.mark.parametrize("oracle, program", sorted({(p[0], p[2]) for p in PLANTED}, key=str),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_honest_pass_passes(oracle, program):
    verdict = _judge(oracle, program)
    assert verdict.status is Status.PASS, verdict


def test_dedup_toggle_catches_a_backend_that_breaks_subgraph_calls():
    verdict = _judge(dedup_toggle.NAME, CHAIN3, backend="suites.planted:corrupt_every_third_invoke_subgraph")
    assert verdict.failed and verdict.kind == "mismatch", verdict


def test_region_identity_catches_the_real_float_constant_bug():
    """KI-001 is a real instance of what the planted int fault simulates."""
    program = _program(
        body=_stmts(("v0", "sin", (Ref("x"),)), ("v1", "rsub_scalar", (Ref("v0"), Arg("s0")))),
        inputs=(("x", TensorSpec((3, 3)),),), args=("s0",), calls=(Call(args=(1.0,)), Call(args=(-0.5,))),
        structure="for_values", flow="fanout", outputs="tuple",
    )
    verdict = _judge(region_identity.NAME, program)
    assert verdict.failed and verdict.details["label"] == "constant:float", verdict


def test_region_identity_compares_regions_up_to_a_renaming_of_their_unbacked_symbols():
    """A data-dependent size is a fresh symbol at every call (nonzero gives u0, then u1): regions alike but for
    that are identical; a region whose two sizes are one symbol where the other's are two is not."""
    from harness.structure import NodeDesc

    def node(shape, source=None):  # type: ignore[no-untyped-def]
        args = [("args[0]", ("input", 0, {"shape": source or ["3"]}))]
        return NodeDesc("n", "call_function", "nonzero", args, {"shape": shape}, None)

    assert region_identity._pair_differences([node(["u0", "1"])], [node(["u1", "1"])]) == []
    assert region_identity._pair_differences([node(["u0", "u0"])], [node(["u1", "u1"])]) == []
    differing = region_identity._pair_differences([node(["u0", "u0"])], [node(["u1", "u2"])])
    assert [d[0] for d in differing] == ["value:shape"], differing
    # the symbol an input brings pairs first: a result reusing it where the other region's makes a new one differs
    differing = region_identity._pair_differences([node(["u0"], ["u0"])], [node(["u2"], ["u1"])])
    assert [d[0] for d in differing] == ["value:shape"], differing
    assert region_identity._pair_differences([node(["s0"])], [node(["s1"])]), "backed symbols are compared as named"


def test_rewrite_accepts_summation_noise_in_16_bit_gradients_only():
    import torch

    a = torch.tensor([-8.4375, 1.0, 0.0], dtype=torch.bfloat16)
    one_ulp = torch.tensor([-8.375, 1.0, 0.0625], dtype=torch.bfloat16)  # a few ulps of the largest element
    far = torch.tensor([-8.4375, 1.0, 0.5], dtype=torch.bfloat16)
    assert rewrite._summation_noise(a, one_ulp, torch.bfloat16)
    assert not rewrite._summation_noise(a, far, torch.bfloat16)
    assert not rewrite._summation_noise(a.float(), one_ulp.float(), torch.float32)  # float32 programs: tolerance only


def test_rewrite_takes_16_bit_gradients_that_cancel_as_noise_only_where_the_compiled_ones_pass_the_referee():
    """Seed 97: a bfloat16 weight gradient whose terms cancel came out 0.8125 for 0.777 with the pass (one float32
    ulp in float32), past the few-ulps bound of the gradient's own largest element; the compiled gradients stand
    within the float64 referee's bounds of eager's, so it is noise; gradients the referee rejects are not."""
    from pathlib import Path

    import torch

    program = Program.from_json((Path(__file__).parent / "data" / "rewrite_gradients_that_cancel.json").read_text())
    outcome = run_program(program, RunConfig(backend="aot_eager", dedup=True))
    assert rewrite.check(outcome).status is Status.PASS
    assert rewrite._refereed(outcome, torch.bfloat16) and not rewrite._refereed(outcome, torch.float32)
    doubled = {k: None if g is None else g * 2 for k, g in outcome.compiled.grads.items()}
    assert not rewrite._refereed(replace(outcome, compiled=replace(outcome.compiled, grads=doubled)), torch.bfloat16)


# Planted faults that torch itself has on the programs above, so a recorded
# issue rightly claims them: torch 2.13 moves a read of a grouped in-place
# write's result past the next call's write once a block writing its input is
# called three times (KI-008, found by a steered campaign); the planted
# mutation_reordered makes that same reordering, and is told apart only by the
# crash it also causes (a node used before it is defined), which campaigns find.
CLAIMED = {"mutation_reordered": "KI-008"}


@pytest.mark.parametrize("oracle, plant, program, kind, label, words", PLANTED,
                         ids=[f"{p[0]}-{p[1].__name__}" for p in PLANTED])
def test_no_known_issue_claims_a_planted_fault(oracle, plant, program, kind, label, words):
    """A planted regression of the pass reads as new: no recorded issue's
    patterns may be so wide that they claim a fault that is not their cause
    (KI-004 a moved plain op, KI-008 a write the tracker recorded, KI-014 a
    group the tracker found and dropped), but where torch has the same bug
    (CLAIMED), and then only that issue."""
    from reports.triage import known_issue, triage

    with plant():
        outcome = run_program(program, RunConfig(backend="aot_eager", companions=ORACLES[oracle].needs))
        verdict = ORACLES[oracle](outcome)
        finding = triage(outcome, verdict)
    claimed = known_issue(finding)
    assert (claimed.id if claimed else None) == CLAIMED.get(plant.__name__), (finding.signature, claimed)


def test_a_region_whose_inputs_share_storage_is_the_pass_refusing_not_a_miss():
    """block(h, h[..., :1]) twice: torch's pass refuses regions with two
    inputs of one storage ('NYI: ... input-output aliasing'), so the calls
    left alone are excluded, not a missed merge (a campaign, seed 3, read
    them as KI-014 before the hazard was read)."""
    program = _program(body=(Stmt("v0", "sin", (Ref("y0"),)), Stmt("v1", "add", (Ref("x"), Ref("v0")))),
                       inputs=(("x", TensorSpec((3, 4), "float32", True)), ("y0", TensorSpec((3, 1)))),
                       block_inputs=("x", "y0"), calls=(Call(alias="view"), Call(alias="view")))
    outcome = run_program(program, RunConfig(backend="aot_eager"))
    record = outcome.capture.structure[0]
    assert record.groups and all(rep.invoke is None and rep.aliasing for rep in record.replacements), record.replacements
    verdict = completeness.check(outcome)
    assert verdict.status is Status.PASS and "aliasing" in verdict.details["excluded"], verdict


# A float constant (KI-001: the tracker forgets floats) and an int constant
# differ between the calls: with ints forgotten too, the group holds both.
FLOAT_AND_INT = _program(
    body=_stmts(("v0", "sin", (Ref("x"),)), ("v1", "rsub_scalar", (Ref("v0"), Arg("s0"))),
                ("v2", "sum", (Ref("v1"), Arg("s1"), Const(True)))),
    inputs=(("x", TensorSpec((3, 3)),),), args=("s0", "s1"), calls=(Call(args=(1.0, -1)), Call(args=(-0.5, -2))),
    structure="for_values", flow="fanout", outputs="tuple", result="v2",
)


def test_a_known_difference_does_not_hide_a_new_one_in_the_same_group():
    """The oracle reports every difference of the group (KI-001's float
    first, then the planted int); triage calls the finding known only if
    each is explained, so it names the int, new."""
    from reports.triage import known_issue, triage

    with planted_pass.ints_ignored():
        outcome = run_program(FLOAT_AND_INT, RunConfig(backend="aot_eager"))
        verdict = region_identity.check(outcome)
        finding = triage(outcome, verdict)
    assert [d["label"] for d in verdict.details["differences"]] == ["constant:float", "constant:int"], verdict.details
    assert finding.signature.startswith("region_identity:constant:dedup:constant:int"), finding.signature
    assert known_issue(finding) is None and "int -1" in finding.verdict.message, finding.verdict
    honest = run_program(FLOAT_AND_INT, RunConfig(backend="aot_eager"))  # KI-001 alone (floats): known
    alone = triage(honest, region_identity.check(honest))
    assert known_issue(alone) is not None and known_issue(alone).id == "KI-001", alone.signature


def test_a_result_dtype_autocast_made_is_the_autocast_difference():
    """Regions merged across autocast (KI-011): the einsum's bfloat16 result
    follows from the state it ran under, so the group's one difference is
    ambient:autocast_cpu, not a second value:dtype that read as new
    (campaign seed 19, minimized)."""
    from pathlib import Path

    from reports.triage import known_issue, triage

    program = Program.from_json((Path(__file__).parent / "data" / "autocast_result_dtype.json").read_text())
    outcome = run_program(program, RunConfig(backend="aot_eager"))
    verdict = region_identity.check(outcome)
    assert [d["label"] for d in verdict.details["differences"]] == ["ambient:autocast_cpu"], verdict.details
    assert known_issue(triage(outcome, verdict)).id == "KI-011"


def test_a_result_that_follows_from_a_differing_argument_is_not_a_difference_of_its_own():
    """sin(x) then tanh, on inputs of two shapes merged (planted
    tensor_metadata_ignored): the tanh's other shape follows from the sin's,
    so the group's one difference is input:shape (a value:shape beside it
    would read as a cause of its own)."""
    verdict = _judge(region_identity.NAME, TWO_SHAPES, planted_pass.tensor_metadata_ignored)
    assert [d["label"] for d in verdict.details["differences"]] == ["input:shape"], verdict.details


def test_a_missed_merge_is_diagnosed_where_the_tracker_grows_regions():
    """A call whose only output is a lone rms_norm beside a dead div ->
    stack piece, the first of three calls keyed apart (nightly tier, seed 1):
    the stack bucket holds that call's node, so no group grows (KI-014's
    'mixed'); diagnosed from the call's outputs alone it read 'dropped', the
    planted fault's label."""
    from pathlib import Path

    from reports.triage import known_issue, triage

    program = Program.from_json((Path(__file__).parent / "data" / "dead_piece_mixed_bucket.json").read_text())
    outcome = run_program(program, RunConfig(backend="eager"))
    verdict = completeness.check(outcome)
    finding = triage(outcome, verdict)
    assert finding.signature.endswith("blocked:mixed") and known_issue(finding).id == "KI-014", finding.signature


def test_a_bucket_holding_two_places_of_one_call_is_crowded_not_dropped():
    """A missed merge where the tracker's bucket holds two nodes of each
    identical call (a dead and a live `x + -inf` in one block) is KI-014's
    lockstep rule, named apart from `blocked:dropped` (what a planted pass
    that drops every group gives, which must read as new)."""
    from pathlib import Path

    from generators.ir import Program
    from reports.triage import known_issue, triage

    program = Program.from_json((Path(__file__).parent / "data" / "crowded_bucket.json").read_text())
    outcome = run_program(program, RunConfig(backend="aot_eager"))
    finding = triage(outcome, completeness.check(outcome))
    assert ":blocked:crowded" in finding.signature and known_issue(finding).id == "KI-014", finding.signature


# Nightly since issue 42's cut to six minutes (8 s: a program compiled with the rewrite recorded inside the compile and without):
# the rewrite oracle's planted faults and its honest pass stay in the gate above
@pytest.mark.nightly
def test_running_the_rewrite_inside_the_compile_adds_no_guard_of_its_own():
    """The rewrite oracle runs the graphs before and after the pass inside the
    compile; run on a symbolic input itself (a size made dynamic by a
    recompile, here a Python argument read by ``split``), that guarded the
    frame on its value, and the next call recompiled a frame the compile
    never makes: one frame more with deduplication than without, which
    dedup_toggle read as the pass adding guards. The run reads the symbol's
    example value instead."""
    from pathlib import Path

    program = Program.from_json((Path(__file__).parent / "data" / "symbolic_input_in_a_rewrite_run.json").read_text())
    plain = run_program(program, RunConfig(backend="aot_eager", record_structure=False))
    recorded = run_program(program, RunConfig(backend="aot_eager", record_structure=True))
    assert any(r.rewrite is not None for r in recorded.capture.structure), "the rewrite ran on no graph"
    assert recorded.capture.frames == plain.capture.frames, (recorded.capture.frames, plain.capture.frames)


def test_extra_guard_is_named_where_the_second_capture_is_sampled_out():
    """Outside ``harness.pipeline.RECAPTURE_EVERY``'s sample the guard comparison reads the main capture."""
    from harness.pipeline import RECAPTURE_EVERY
    from harness.sample import in_sample

    program = next(replace(CHAIN, seed=s) for s in range(100) if not in_sample(replace(CHAIN, seed=s), RECAPTURE_EVERY, "recapture"))
    run_program(CHAIN, RunConfig(companions=()))  # so the judged compile is not this process's first
    with planted_pass.extra_guard():
        outcome = run_program(program, RunConfig(companions=ORACLES[dedup_toggle.NAME].needs))
    assert "recapture" not in outcome.companions and "RECAPTURE_EVERY" in outcome.spared["recapture"], outcome.spared
    verdict = dedup_toggle.check(outcome)
    assert verdict.failed and verdict.kind == "guards", verdict
    assert determinism.check(outcome).status is Status.PASS


@pytest.mark.parametrize("spelling", ["functional", "torch"])
def test_instance_norm_writes_the_running_statistics_it_is_given(spelling):
    """F.instance_norm (and torch.instance_norm under it) updates running_mean and running_var in place while it
    normalizes by the input's statistics: a region holding it writes its inputs, which the pass refuses to
    replace, so identical repeats left alone are excluded, not missed (an OpenVINO campaign's OpInfo batch read
    them as a missed merge)."""
    import torch
    import torch.nn.functional as F

    from harness.effects import written_args

    def norm(x, rm, rv, use):
        if spelling == "functional":
            return F.instance_norm(x, running_mean=rm, running_var=rv, use_input_stats=use)
        return torch.instance_norm(x, None, None, rm, rv, use, 0.1, 1e-5, False)

    graphs = []

    def backend(gm, _):
        graphs.append(gm)
        return gm

    for use in (True, False):
        torch._dynamo.reset()
        torch.compile(lambda x, rm, rv: norm(x, rm, rv, use), backend=backend)(
            torch.randn(3, 2, 4), torch.zeros(2), torch.ones(2))
        node = next(n for n in graphs[-1].graph.nodes if n.op == "call_function")
        assert [w.name for w in written_args(node)] == (["l_rm_", "l_rv_"] if use else []), node.format_node()
