"""The guard oracles against planted faults in Dynamo's guards, and against
the honest guards on the same programs (so each firing is the fault's doing)."""

from __future__ import annotations

from unittest import mock

import pytest

from dataclasses import replace

from generators.ir import Arg, Block, Call, Const, Free, FreeVar, Options, Program, Ref, Section, Stmt, TensorSpec
from generators.variants import variants
from harness import recall
from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import guards
from oracles.verdict import Status

from . import planted_guards, planted_pass
from harness import warm

pytestmark = pytest.mark.unit


def _program(body, result, kind="function", args=(), calls=(Call(), Call()), frees=(), attrs=False,
             structure="calls", inputs=(("x", TensorSpec((3, 4)),),)):
    return Program(
        inputs=inputs,
        block=Block(kind, ("x",), (), (), args, tuple(Stmt(o, op, ops) for o, op, ops in body), result, attrs=attrs),
        sections=(Section(structure, "chain", calls),),
        options=Options(fullgraph=True),
        frees=frees,
    )


# softmax in float32, cast back to x's dtype: the graph holds bfloat16 as a constant
UPCAST = _program([("v0", "sin", (Ref("x"),)), ("v1", "softmax_upcast", (Ref("v0"), Const(-1)))], "v1",
                  inputs=(("x", TensorSpec((3, 4), "bfloat16")),))
# x * P0, P0 a module global; one call, so no subgraph call meets the
# symbolic float a recompile makes of P0 (KI-016)
GLOBAL = _program([("v0", "sin", (Ref("x"),)), ("v1", "mul_scalar", (Ref("v0"), Free("p0")))], "v1",
                  frees=(FreeVar("p0", 2.0, "global"),), calls=(Call(),))
# each Block instance holds s0 as an attribute: self.s0
ATTRS = _program([("v0", "sin", (Ref("x"),)), ("v1", "mul_scalar", (Ref("v0"), Arg("s0")))], "v1",
                 kind="module", args=("s0",), attrs=True, structure="module_list",
                 calls=(Call(args=(2.0,)), Call(args=(2.0,))))
# copysign(sin(x), P0) + P0 with P0 = 0.0 a module global: both the sign of zero and NaN show in the result
EDGE = _program([("v0", "sin", (Ref("x"),)), ("v1", "copysign", (Ref("v0"), Free("p0"))),
                 ("v2", "add_scalar", (Ref("v1"), Free("p0")))], "v2",
                frees=(FreeVar("p0", 0.0, "global"),), calls=(Call(),))
# two Block instances (program attributes m0_0, m0_1) with a weight each, each holding a sub-block
# instance with a weight of its own in a ModuleDict
MLP = Block("module", ("x",), (("w0", TensorSpec((4, 4), requires_grad=True)),), (), (),
            (Stmt("v0", "matmul", (Ref("x"), Ref("w0"))),), "v0", name="mlp")
MODULES = replace(_program([("v0", "block", (Ref("x"), Const("mlp"), Const(0))),
                            ("v1", "matmul", (Ref("v0"), Ref("w0")))], "v1", kind="module"), subs=(MLP,))
MODULES = replace(MODULES, block=replace(MODULES.block, weights=(("w0", TensorSpec((4, 4), requires_grad=True)),),
                                         holder="module_dict"))
# GLOBAL with P0 an item of a module-global dict, read by key: OPTS['p0']
DICT = replace(GLOBAL, frees=(FreeVar("p0", 2.0, "dict"),))
# the same item read with a default, OPTS.get('p0', 0.5): its key can be taken out between calls
DICT_GET = replace(GLOBAL, frees=(FreeVar("p0", 2.0, "dict", (0.5,)),))
# MODULES compiled with Dynamo guarding on module hooks: the only programs whose changes add hooks
HOOKED = replace(MODULES, options=replace(MODULES.options, settings=("guard.module_hooks",)))


def _run(program, kind, backend="aot_eager", **config):
    """Run ``program`` with just the variants of ``kind``."""
    chosen = [v for v in variants(program) if v.kind == kind]
    assert chosen, f"the generator offers no {kind} variant for this program"
    with mock.patch.object(recall, "select", lambda p, limit: chosen):
        return run_program(program, RunConfig(backend=backend, variants=len(chosen), **config))


def _assert_repro_exits(tmp_path, program, check, variant, planted):
    """The ``check`` repro of ``variant`` on ``program`` exits 1 on the ``planted`` backend, 0 on aot_eager."""
    from pathlib import Path

    root = Path(__file__).parent.parent
    for backend, status in ((planted, 1), ("aot_eager", 0)):
        path = tmp_path / "repro.py"
        path.write_text(planted_pass.render_planted(program, backend, check, variant, expect_crash=""))
        done = warm.run([str(path)], timeout=300, cwd=str(root))
        assert done.returncode == status, (backend, done.stdout[-2000:], done.stderr[-2000:])


PLANTED = [
    (planted_guards.dtype_check_dropped, UPCAST, "input:dtype"),
    (planted_guards.constant_check_dropped, GLOBAL, "free:global"),
    (planted_guards.module_attribute_check_dropped, ATTRS, "attr:instance"),
    (planted_guards.float_guard_signless, EDGE, "free:global:nan"),
    (planted_guards.module_identity_dropped, MODULES, "module:replace:modules_dict"),
    (planted_guards.module_identity_dropped, MODULES, "module:replace:add_module"),
    (planted_guards.module_identity_dropped, MODULES, "module:replace:container"),  # the child in a ModuleDict
    (planted_guards.module_hook_check_dropped, HOOKED, "hook:forward_pre"),
    (planted_guards.dict_item_check_dropped, DICT, "object:dict"),  # the item changed in place
    (planted_guards.dict_item_check_dropped, DICT, "free:dict"),  # the dict replaced by one with another item
    (planted_guards.dict_item_check_dropped, DICT_GET, "object:dict:removed"),  # the key gone: its default read
]


def test_an_entry_that_accepts_more_than_it_was_compiled_for_is_run_there(tmp_path):
    """The key of OPTS.get('p0', 0.5) taken out: the recompiled entry reads the default. With the key checks
    dropped it also accepts the call with the key back, which Dynamo serves from the first entry (no stale
    result to see); run on that call, its code computes with the default: over_accepting. The repro
    (driver "over_accepting") exits 1 on the fault, 0 on honest guards."""
    from reports.repro import driver_for

    honest = _run(DICT_GET, "object:dict:removed")
    assert guards.check(honest).status is Status.PASS and honest.capture.variants[0].reverse is None
    with planted_guards.dict_key_check_dropped():
        outcome = _run(DICT_GET, "object:dict:removed")
    verdict = guards.check(outcome)
    assert verdict.failed and verdict.kind == "over_accepting", verdict
    assert verdict.details["label"] == "over_accepting:object:dict:removed"
    check, variant = driver_for(verdict.details, "wrong", verdict.oracle, verdict.kind)
    assert check == "over_accepting"
    _assert_repro_exits(tmp_path, DICT_GET, check, variant, "suites.planted_guards:dict_key_check_dropped__aot_eager")


def test_a_dropped_dict_item_guard_is_met_only_through_the_dict_home():
    """The same program with P0 a plain module global: its EQUALS_MATCH guard is no dict item's."""
    with planted_guards.dict_item_check_dropped():
        outcome = _run(GLOBAL, "free:global")
    assert guards.check(outcome).status is Status.PASS, guards.check(outcome)


def test_hooks_are_added_between_calls_only_where_dynamo_is_told_to_guard_them():
    assert not [v for v in variants(MODULES) if v.kind.startswith("hook:")]  # skip_nnmodule_hook_guards: documented
    added = {(v.kind, v.target) for v in variants(HOOKED) if v.kind.startswith("hook:")}
    # the layer's last instance and its sub-block; a backward hook breaks a fullgraph program's graph: refused
    assert {k for k, _ in added} == {"hook:forward", "hook:forward_pre", "hook:forward_kwargs", "hook:param_grad"}
    assert {t for _, t in added} == {"model.m0_1", "model.m0_1.subs['mlp_0']", "model.m0_1.w0"}
    open_graph = replace(HOOKED, options=replace(HOOKED.options, fullgraph=False))
    assert "hook:backward_pre" in {v.kind for v in variants(open_graph)}


def test_removing_the_module_hooks_a_program_registers_recompiles_and_is_judged_right():
    """The hooks a program's autograd feature puts on its block instances (generators.autograd), all removed
    after the first call: Dynamo guards a dict holding hooks by its keys (no planted fault here: see
    planted_guards.module_hook_check_dropped), so the call recompiles and computes what eager does."""
    program = replace(HOOKED, options=replace(HOOKED.options, fullgraph=False, autograd=("module.forward_replace",)))
    outcome = _run(program, "hook:remove")
    assert guards.check(outcome).status is Status.PASS, guards.check(outcome)
    run = outcome.capture.variants[0]
    assert run.recompiled and any("_forward_hooks" in r for r in run.recompile_reasons), run.recompile_reasons


@pytest.mark.parametrize("fault, program, kind", PLANTED, ids=[f"{f[0].__name__}-{f[2]}" for f in PLANTED])
def test_a_dropped_guard_is_a_stale_result(fault, program, kind):
    honest = _run(program, kind)
    assert guards.check(honest).status is Status.PASS, guards.check(honest)
    with fault():
        outcome = _run(program, kind)
    verdict = guards.check(outcome)
    assert verdict.failed and verdict.kind == "stale", verdict
    assert verdict.details["label"] == f"stale:{kind}"
    assert verdict.details["variant"]["kind"] == kind and verdict.details["guards"]
    assert not verdict.details["recompiled"]


def test_an_over_eager_guard_is_an_unneeded_recompile():
    honest = _run(GLOBAL, "input:values")
    assert guards.check_recompiles(honest).status is Status.PASS
    with planted_guards.storage_guarded():
        outcome = _run(GLOBAL, "input:values")
    verdict = guards.check_recompiles(outcome)
    assert verdict.failed and verdict.kind == "recompile", verdict
    assert "data_ptr" in verdict.message  # Dynamo's own recompile reason names the guard


def test_an_entry_serving_another_dtype_is_unguarded_though_its_values_are_right(tmp_path):
    """GLOBAL computes in its input's dtype (no constant of it in the graph): the entry compiled for float32,
    reused for float64 under a tensor guard without its dtype check, computes what eager does on aot_eager
    (which runs ops as they come), so no value shows the fault; the TENSOR_MATCH guard the capture recorded
    on x says the entry should have been rejected. The repro (driver "unguarded") exits 1 on the fault, 0
    on honest guards."""
    from reports.repro import driver_for

    honest = _run(GLOBAL, "input:dtype")
    assert guards.check(honest).status is Status.PASS, guards.check(honest)
    assert "x" in guards.tensor_matched(honest.capture)
    with planted_guards.dtype_check_dropped():
        outcome = _run(GLOBAL, "input:dtype")
    verdict = guards.check(outcome)
    assert verdict.failed and verdict.kind == "unguarded", verdict
    assert verdict.details["label"] == "unguarded:input:dtype" and not verdict.details["recompiled"]
    check, variant = driver_for(verdict.details, "wrong", verdict.oracle, verdict.kind)
    assert check == "unguarded"
    _assert_repro_exits(tmp_path, GLOBAL, check, variant, "suites.planted_guards:dtype_check_dropped__aot_eager")


def test_guards_differ_with_deduplication_on_recompile():
    # GLOBAL groups nothing: a campaign compiles it without the pass only in
    # its audit sample (harness.pipeline.spared), so the planted pass, which
    # adds its guard without grouping anything, is met there.
    on = _run(GLOBAL, "free:global", companions=("dedup_off",), spare=False)
    assert guards.check(on).status is Status.PASS, guards.check(on)
    with planted_pass.extra_guard():
        on = _run(GLOBAL, "free:global", companions=("dedup_off",), spare=False)
    verdict = guards.check(on)
    assert verdict.failed and verdict.kind == "dedup_guards", verdict
    assert any("nn" in g for g in verdict.details["extra"])


def test_a_first_call_already_wrong_is_left_to_the_differential_oracle(monkeypatch):
    outcome = _run(GLOBAL, "repeat")
    monkeypatch.setattr(outcome.compiled, "outputs", [o + 1 for o in outcome.compiled.outputs])
    assert guards.check(outcome).kind == "first_call_wrong"


def test_variants_run_from_the_same_start():
    """Neutral changes leave the cache alone; changes of meaning recompile
    for a reason Dynamo names; the first entry accepts the first call again."""
    outcome = run_program(GLOBAL, RunConfig(variants=-1))
    runs = {r.variant["kind"]: r for r in outcome.capture.variants}
    assert outcome.capture.original_accepts_original is True
    assert not runs["repeat"].recompiled and runs["repeat"].served_by_original
    assert runs["free:global"].recompiled and not runs["free:global"].original_accepts
    assert any("P0" in r for r in runs["free:global"].original_rejects_because)
    assert runs["free:global"].recompile_reasons
    assert runs["input:dtype"].recompiled and any("dtype" in r for r in runs["input:dtype"].recompile_reasons)
    assert all(not r.invalid for r in runs.values()), [r.invalid for r in runs.values() if r.invalid]
    assert guards.check(outcome).status is Status.PASS
    assert guards.check_recompiles(outcome).status is Status.PASS


# Changes that miss each fault above: what only the new changes catch.
MISSED = [
    (planted_guards.float_guard_signless, EDGE, ["free:global", "free:global:type"]),
    (planted_guards.module_identity_dropped, MODULES,
     ["param:replace", "module:replace:setattr", "module:replace:delattr", "module:load_state_dict"]),
]


@pytest.mark.parametrize("fault, program, kinds", MISSED, ids=[f[0].__name__ for f in MISSED])
def test_only_the_edge_and_route_changes_catch_these_faults(fault, program, kinds):
    """A float guard blind to NaN still rejects every ordinary new value; a
    module whose changes are seen only through ``__setattr__`` recompiles
    for a new Parameter, a submodule set as an attribute (delattr included)
    and keeps right for load_state_dict (the same tensors, new values): no
    changed call is served a stale result. (The entry such a recompile makes
    bakes the new module's tensors in and, its identity unchecked, accepts the
    old module too: the reverse check, harness.recall.run_reverse, catches
    that as over_accepting.)"""
    for kind in kinds:
        with fault():
            outcome = _run(program, kind)
        verdict = guards.check(outcome)
        assert verdict.status is Status.PASS or verdict.kind == "over_accepting", (kind, verdict)


def test_torch_reuses_a_graph_compiled_for_0_0_when_a_float_turns_to_minus_0_0():
    """A finding of the real torch 2.13 (KI-025): Dynamo guards floats with
    ``==``, so after ``P0 = -0.0`` the entry compiled for ``P0 = 0.0`` is
    reused and ``copysign`` returns the wrong sign. With the sign checked
    too (``float_sign_guarded``) the same change recompiles and is right:
    the guard alone is at fault. (Once Dynamo compares floats bitwise,
    pytorch/pytorch#192604, the first half of this test fails: drop it.)"""
    verdict = guards.check(_run(EDGE, "free:global:sign"))
    assert verdict.failed and verdict.kind == "stale", verdict
    assert verdict.details["label"] == "stale:free:global:sign"
    assert verdict.details["original_accepts"] and not verdict.details["recompiled"]
    with planted_guards.float_sign_guarded():
        outcome = _run(EDGE, "free:global:sign")
    assert guards.check(outcome).status is Status.PASS, guards.check(outcome)
    assert outcome.capture.variants[0].recompiled


# One call passes torch.sigmoid, then torch.Tensor.neg, to a helper across a
# graph break in a loop (found by the nightly tier).
CALLABLE_ACROSS_A_BREAK = Program.from_json(
    '{"block": {"args": ["s0"], "attrs": false, "body": [{"op": "apply", "operands": [{"ref": "x"}, {"arg": "s0"}], '
    '"out": "v0"}], "buffers": [], "compile_region": false, "inputs": ["x"], "kind": "function", "result": "v0", '
    '"weights": []}, "frees": [], "inputs": [["x", {"dtype": "float32", "layout": "contiguous", "requires_grad": true, '
    '"shape": [2, 3]}]], "interludes": [], "meta": {}, "options": {"dynamic": null, "fullgraph": false, '
    '"mark_dynamic": []}, "outputs": "single", "sections": [{"calls": [{"args": [{"fn": "torch.sigmoid"}], '
    '"context": {}}, {"args": [{"fn": "torch.Tensor.neg"}], "context": {}}], "flow": "chain", '
    '"interleave": "graph_break", "keywords": true, "outer": 1, "structure": "for_range"}], "seed": 1}')


def test_a_stale_result_on_the_same_call_again_names_the_difference_it_needs():
    """Nothing the program reads changes between the two calls (the same
    call again, model.eval() on a function), so the signature names what
    differs between repeats inside one call (here a callable argument): the
    finding is KI-024's (an unguarded method descriptor), and a stale repeat
    that needs no difference would stay new."""
    from oracles.registry import run_config
    from reports.triage import known_issue, triage

    outcome = run_program(CALLABLE_ACROSS_A_BREAK, run_config("aot_eager"))
    verdict = guards.check(outcome)
    assert verdict.failed and verdict.kind == "stale" and verdict.details["variant"]["neutral"], verdict
    finding = triage(outcome, verdict)
    assert finding.signature == f"guards:stale:backend:{verdict.details['label']}:arg:callable"
    assert known_issue(finding).id == "KI-024"


def test_a_dedup_guards_repro_compares_the_change_with_deduplication_on_and_off(tmp_path):
    """A dedup_guards finding's repro (driver "dedup_guards") compiles the
    program twice, makes the recompiles the finding met before its change
    and the change, and compares whether it recompiled and the guards it
    installed: exit 1 under a pass that adds a guard, 0 without one (the
    values driver could never reproduce such a finding: its values agree)."""
    from reports.repro import driver_for

    with planted_pass.extra_guard():
        on = _run(GLOBAL, "free:global", companions=("dedup_off",), spare=False)
    verdict = guards.check(on)
    assert verdict.failed and verdict.kind == "dedup_guards", verdict
    check, variant = driver_for(verdict.details, "wrong", verdict.oracle, verdict.kind)
    assert check == "dedup_guards" and variant["before"] == []
    _assert_repro_exits(tmp_path, GLOBAL, check, variant, "suites.planted_pass:extra_guard__aot_eager")


@pytest.mark.parametrize("fault, program, kind", PLANTED, ids=[f"{f[0].__name__}-{f[2]}" for f in PLANTED])
def test_a_dropped_guard_stays_stale_in_triage(fault, program, kind):
    """A fresh compile under the change is right where a guard is missing, so
    triage keeps the finding stale (and new)."""
    from reports.triage import known_issue, triage

    chosen = [v for v in variants(program) if v.kind == kind]
    with fault(), mock.patch.object(recall, "select", lambda p, limit: chosen):
        outcome = run_program(program, RunConfig(variants=len(chosen)))
        verdict = guards.check(outcome)
        finding = triage(outcome, verdict)
    assert finding.signature.startswith(f"guards:stale:") and "fresh_entry_alike" not in finding.extra, finding.signature
    assert known_issue(finding) is None, finding.signature


# KI-001 met by the guard oracle: block(x, -1.0), block(x, 1.0) with
# x.masked_fill(x > 0, s0); the first call's x has no positive entry, so the
# merged fill is a no-op there and shows only after new input values.
FILL = Program.from_json(
    '{"inputs": [["x", {"shape": [2], "dtype": "float32", "requires_grad": false, "layout": "contiguous"}]], '
    '"block": {"kind": "function", "inputs": ["x"], "weights": [], "buffers": [], "args": ["s0"], "body": '
    '[{"out": "v5", "op": "masked_fill", "operands": [{"ref": "x"}, {"const": 0.0}, {"arg": "s0"}]}], '
    '"result": "v5", "compile_region": false, "attrs": false}, "sections": [{"structure": "calls", '
    '"flow": "fanout", "calls": [{"args": [-1.0]}, {"args": [1.0]}], "outer": 1, "interleave": null, '
    '"keywords": false}], "interludes": [], "outputs": "tuple", "options": {"fullgraph": false, '
    '"dynamic": null, "mark_dynamic": []}, "seed": 2125, "frees": [], "meta": {}}')


def test_a_wrong_compile_new_values_reveal_is_not_stale():
    """The entry compiled for the first call is reused after new input values
    and is wrong, but a fresh compile called first with those values returns
    the same: no guard is missing; triage names the wrong compile (KI-001)."""
    from reports.triage import known_issue, triage

    chosen = [v for v in variants(FILL) if v.kind == "input:values"]
    with mock.patch.object(recall, "select", lambda p, limit: chosen):
        outcome = run_program(FILL, RunConfig(variants=1, companions=guards.NEEDS))
        verdict = guards.check(outcome)
        assert verdict.failed and verdict.kind == "stale", verdict
        finding = triage(outcome, verdict)
    assert finding.signature == "guards:mismatch:dedup:arg:float:input:values", finding.signature
    assert finding.extra["fresh_entry_alike"] and known_issue(finding).id == "KI-001"


def test_a_frame_first_reached_on_a_later_call_is_not_blamed_on_the_change():
    """A found false alarm (issue 33's measurement campaign, seed 1): the
    called frame fails to compile and runs eagerly, and the frame it calls was
    compiled under inference mode only, so the next call (under grad mode)
    compiles it: whatever changed in that call was blamed. The same call once
    more before the changes (harness.recall.run_variants) takes that compile."""
    from pathlib import Path

    program = Program.from_json((Path(__file__).parent / "data" / "recompile_on_first_reach.json").read_text())
    config = RunConfig(backend="aot_eager", variants=-1)
    outcome = run_program(program, config)
    assert outcome.capture.original_accepts_original is None  # the called frame has no entry: the case at hand
    assert [r.variant["kind"] for r in outcome.capture.variants if r.variant["kind"] == "attr:training"]
    verdict = guards.check_recompiles(outcome)
    assert not verdict.failed, verdict


def test_a_data_dependent_size_explains_a_recompile_whatever_entries_of_other_states_say():
    """A campaign (issue 44's review, seed 0) met new input values
    recompiling the frame resumed after ``masked_select`` in a program whose
    repeats set the grad mode and default dtype: the entry compiled for the
    call's own state failed on the size of the data-dependent tensor handed
    across the break (explained), the entries of the other states on their
    global state (which could never serve it). Those are not an unexplained
    recompile; a new state alone, or a guard of another kind, still is."""
    from oracles.guards import _explained_by_data

    seen = ["2/3: GLOBAL_STATE changed: grad_mode ", "2/2: GLOBAL_STATE changed: grad_mode default_dtype ",
            "2/1: GLOBAL_STATE changed: default_dtype ",
            "2/0: tensor '___stack1' size mismatch at index 0. expected 60, actual 52"]
    assert _explained_by_data(seen)
    assert not _explained_by_data(seen[:3])  # every entry of another state: the call's state is new
    assert not _explained_by_data([*seen, "1/0: tensor 'L['x']' size mismatch at index 0. expected 4, actual 5"])


def test_triage_re_runs_make_the_failing_change_after_those_that_recompiled_before_it():
    """Every change the program offers is made in the run; triage's re-runs make only the failing one, after the
    changes before it that recompiled (RunConfig.changes), and find it again in a verdict read back from JSON."""
    import json

    from generators.variants import change_key
    from oracles.verdict import Verdict
    from reports.triage import _history, triage

    fault, program, kind = PLANTED[1]  # constant_check_dropped on GLOBAL: a stale result after free:global
    with fault():
        outcome = run_program(program, RunConfig(variants=-1, companions=guards.NEEDS))
        verdict = guards.check(outcome)
        assert verdict.failed and verdict.details["variant"]["kind"].startswith(kind), verdict
        finding = triage(outcome, verdict)
    runs = outcome.capture.variants
    at = next(i for i, r in enumerate(runs) if r.variant == verdict.details["variant"])
    expected = tuple(change_key(r.variant) for r in runs[:at] if r.recompiled and r.compiled is not None) \
        + (change_key(verdict.details["variant"]),)
    assert len(runs) > len(expected) and finding.config.changes == expected, (finding.config.changes, len(runs))
    read_back = Verdict(verdict.oracle, verdict.status, kind=verdict.kind,
                        details=json.loads(json.dumps(verdict.details, default=str)))
    assert _history(outcome, read_back) == expected
    assert finding.signature.startswith("guards:stale:"), finding.signature


def test_a_refusal_torch_documents_for_an_autograd_feature_is_no_crash_after_a_change():
    """backward(retain_graph=True) through a graph compiled with donated buffers raises, as torch documents
    (generators.autograd: grad.retain's refusals). The differential oracle counted it apart; after a change
    (x: shape (1,) -> (2, 1), recompiled) the guard oracle called it a crash of the backend (a 90-s
    campaign, seed 0)."""
    from pathlib import Path

    from oracles.registry import run_config

    program = Program.from_json((Path(__file__).parent / "data" / "retain_graph_donated_after_change.json").read_text())
    verdicts = guards.each_call(run_program(program, run_config("aot_eager", (guards.NAME,), variants=-1)))
    refused = [v for v in verdicts.values() if "donated buffers" in v.message]
    assert refused and all(v.status is Status.INCONCLUSIVE and v.kind == "unsupported" for v in refused), verdicts


def test_a_sign_change_another_instance_shares_through_the_equality_guard_stays_stale():
    """Two Blocks (s0 = -0.0 and 0.0), each forward a frame of its own, the second's s0 changed to the other
    zero: the entry compiled for the first instance serves it (KI-025's == guard). Triage asked whether a fresh
    compile under the change returns the same result, to rename a stale entry a wrong compile; the fresh
    compile met the same guard through the sibling instance, agreed, and the finding left KI-025's name."""
    from pathlib import Path

    from oracles.registry import run_config
    from reports.triage import known_issue, triage

    program = Program.from_json((Path(__file__).parent / "data" / "sign_change_shared_by_two_instances.json").read_text())
    outcome = run_program(program, run_config("aot_eager"))
    verdict = guards.check(outcome)
    assert verdict.kind == "stale" and verdict.details["variant"]["kind"].endswith(":sign"), verdict
    finding = triage(outcome, verdict)
    assert finding.signature.startswith("guards:stale:") and known_issue(finding).id == "KI-025", finding.signature


def test_a_dedup_toggle_guards_finding_has_a_repro_that_compares_the_first_compiles_guards(tmp_path):
    """The dedup-toggle oracle compares the guards of the first compile with and without the pass; its repro
    compared values only, which agree, and exited 0 on a pass that adds a guard. The dedup_guards driver with
    no change compares the first compile's guards: 1 on such a pass, 0 without (a fresh process's first
    trace, which installs guards of its own, included)."""
    from oracles import dedup_toggle
    from reports.repro import driver_for

    with planted_pass.extra_guard():
        outcome = run_program(GLOBAL, RunConfig(companions=("dedup_off", "recapture"), spare=False))
    verdict = dedup_toggle.check(outcome)
    assert verdict.failed and verdict.kind == "guards" and any("nn" in g for g in verdict.details["extra"]), verdict
    check, variant = driver_for(verdict.details, "wrong", verdict.oracle, verdict.kind)
    assert (check, variant) == ("dedup_guards", None)
    _assert_repro_exits(tmp_path, GLOBAL, check, variant, "suites.planted_pass:extra_guard__aot_eager")


def test_an_entry_run_on_the_call_it_also_accepts_starts_from_the_first_calls_state():
    """The changed calls start from the model's values; those were taken after the first compiled call, which
    had written a buffer in place (batch norm's running stats), so the entry a change compiled, run on the call
    without it, updated the buffer twice and was compared with eager's once: ``over_accepting`` at
    state[buffer:m0_0.r0] (a 10-minute campaign; a helper's triage: plain calls in any order match eager). The
    values are taken before the first call."""
    from pathlib import Path

    from oracles.registry import run_config

    program = Program.from_json((Path(__file__).parent / "data" / "buffer_written_before_the_reverse_run.json").read_text())
    outcome = run_program(program, run_config("aot_eager", (guards.NAME,)))
    reversed_ = [r for r in outcome.capture.variants if r.reverse is not None]
    assert reversed_, "the program's change no longer compiles an entry that accepts the call without it"
    verdict = guards.check(outcome)
    assert verdict.kind != "over_accepting", verdict


def test_an_entry_dynamo_invalidated_is_no_candidate_of_the_reverse_check(monkeypatch):
    """Dynamo empties an entry whose guarded object died (its code None): the reverse check met one in campaigns
    (stop 67's 10-minute one: 9 harness errors, 'NoneType' object has no attribute 'co_freevars'), and a worker's
    error loses the program's every judgment."""
    import contextlib
    from types import SimpleNamespace

    from harness import recall

    class Bench:
        model = None

        @contextlib.contextmanager
        def applied(self, change):
            yield [], {}

        @contextlib.contextmanager
        def as_called(self):
            yield

    monkeypatch.setattr(recall, "_frame_locals", lambda model, inputs, kwargs: {})
    dead = SimpleNamespace(code=None, guard_manager=SimpleNamespace(check=lambda frame: True))
    assert recall.run_reverse(Bench(), [dead]) is None
