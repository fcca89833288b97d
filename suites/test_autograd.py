"""The autograd graph through regions (generators.autograd): every feature
renders, runs in eager and round-trips; the IR keeps each where its contract
allows; the autograd-trace oracle fires on each kind of broken promise and
on nothing torch does not promise; a refusal torch documents is counted,
not found; drawn programs with the family pass a correct pipeline (the eager
backend, no deduplication) but for recorded issues; and the mutation
operator and the reducer give and take the family. The planted faults of
each family are judged in test_planted_features.py."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from generators.autograd import FAMILIES, FEATURES
from generators.check import check, fitting_autograd
from generators.codegen import render
from generators.features import features, universe
from generators.ir import Block, Call, MalformedProgram, Options, Program, Ref, Section, Stmt, TensorSpec
from generators.mutate import mutate
from generators.reduce import proposals
from generators.strategies import programs
from harness.loader import load_source
from harness.outcome import Capture, Execution, Outcome, RunConfig
from harness.pipeline import run_eager, run_program
from oracles import autograd_trace, differential
from oracles.registry import run_config
from oracles.verdict import Status
from suites.test_property import _share

pytestmark = pytest.mark.unit

X = ("x", TensorSpec((3, 4), "float32", True))
Y = ("y0", TensorSpec((3, 4), "float32", False))
W = ("w0", TensorSpec((4, 4), "float32", True))


def _program(*names: str, kind: str = "module", region: bool = False, n: int = 3) -> Program:
    body = (Stmt("v0", "matmul", (Ref("x"), Ref("w0"))), Stmt("v1", "mul", (Ref("v0"), Ref("y0"))),
            Stmt("v2", "tanh", (Ref("v1"),)))
    block = Block(kind, ("x", "y0"), (W,), (), (), body, "v2", compile_region=region)
    structure = "module_list" if kind == "module" else "for_range"
    return Program(inputs=(X, Y), block=block, sections=(Section(structure, "chain", (Call(),) * n),),
                   options=Options(autograd=names))


def _eager(program: Program) -> Execution:
    return run_eager(load_source(render(program)), program, RunConfig())


# What each feature records in eager on _program (0: it changes gradients or saves, it observes nothing)
RECORDS = {"tensor.observe": 3, "tensor.input": 3, "tensor.output": 3, "tensor.post_accumulate": 2,
           "node.hooks": 6, "node.multi_all": 8, "node.multi_any": 3, "module.forward_pre": 2,
           "module.forward": 2, "module.forward_kwargs": 2, "module.backward": 4, "saved.pair": -1,
           "grad.double": 4, "saved.modified": 1,
           "module.global_forward": 6, "module.global_backward": 6}  # the three Blocks' calls


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_every_feature_renders_runs_in_eager_round_trips_and_is_in_the_universe(name):
    program = _program(name)
    check(program)
    assert Program.from_json(program.to_json()) == program
    run = _eager(program)
    recorded = RECORDS.get(name, 0)
    assert len(run.trace) == recorded if recorded >= 0 else run.trace, [label for _, label, _ in run.trace]
    assert f"autograd:{name}" in features(program) and f"autograd:{name}" in universe()
    assert {f.family for f in FEATURES.values()} == set(FAMILIES)


def test_two_contexts_around_a_run_are_both_entered():
    """A global module hook and saved tensors hooks, features of two families, are each a context the run
    goes under: the program enters both (one was dropped when only one feature could be around a run)."""
    program = _program("module.global_forward", "saved.pair")
    check(program)
    assert "_contexts(" in render(program)
    labels = {label for _, label, _ in _eager(program).trace}
    assert {"saved.pack", "global.forward.Block.pre", "global.forward.Block.post"} <= labels


def test_features_that_change_gradients_change_them_in_eager():
    plain = _eager(_program())
    for name in ("tensor.scale", "module.forward_replace", "module.backward_replace", "grad.retain"):
        changed = _eager(_program(name))
        assert not torch.allclose(changed.grads["param:layers0.0.w0"], plain.grads["param:layers0.0.w0"]), name
    for name in ("saved.float64", "saved.negate", "saved.cpu", "saved.pair", "grad.edge"):  # the same gradients
        torch.testing.assert_close(_eager(_program(name)).grads, plain.grads)


def test_the_ir_keeps_each_feature_where_its_contract_allows():
    with pytest.raises(MalformedProgram):  # a side effect in a region body: refused by design
        check(_program("tensor.observe", region=True))
    check(_program("tensor.scale", region=True))  # a hook without side effects may sit there
    check(_program("module.forward", region=True))  # module hooks sit outside forward
    with pytest.raises(MalformedProgram):
        check(_program("module.forward", kind="function"))
    with pytest.raises(MalformedProgram):
        check(_program("tensor.observe", "tensor.scale"))  # one per family
    with pytest.raises(MalformedProgram):
        check(_program("no.such_feature"))
    with pytest.raises(MalformedProgram):
        check(replace(_program("grad.subset"), options=Options(fullgraph=True, autograd=("grad.subset",))))
    assert "tensor.observe" not in fitting_autograd(_program(region=True))
    assert "module.forward" not in fitting_autograd(_program(kind="function"))


def _outcome(eager: list, compiled: list, reference: list | None = None) -> Outcome:
    def run(trace):
        return Execution(trace=[(p, label, None if v is None else torch.tensor(v)) for p, label, v in trace])

    program = _program("tensor.observe")
    return Outcome(program, RunConfig(), "", run(eager), run(eager), run(reference or eager), run(compiled), Capture())


E = [("forward", "module.forward[0]", [1.0]), ("backward", "tensor.mid", [2.0]), ("backward", "tensor.mid", [3.0]),
     ("backward", "node.pre", [1.0]), ("backward", "node.post", [1.0]), ("forward", "saved.pack", 1.0),
     ("backward", "saved.unpack", 1.0)]


@pytest.mark.parametrize("compiled, kind", [
    ([r for r in E if r[1] != "module.forward[0]"], "hook:missing"),
    (E + [("backward", "tensor.mid", [3.0])], "hook:extra"),
    (E + [("backward", "tensor.input", None)], "hook:unreached"),
    (E + [("backward", "tensor.input", [0.0, -0.0])], "hook:zeros"),
    (E + [("backward", "tensor.input", [0.0, 1e-30])], "hook:extra"),
    ([(p, lab, [9.0] if v == [3.0] else v) for p, lab, v in E], "hook:value"),
    ([r for r in E if r[1] != "node.pre"] + [("backward", "node.pre", [1.0])], "hook:order"),
])
def test_the_trace_oracle_fires_on_each_broken_promise(compiled, kind):
    verdict = autograd_trace.check(_outcome(E, compiled))
    assert verdict.failed and verdict.kind == kind, verdict


def test_the_trace_oracle_blames_nothing_torch_does_not_promise():
    # backward records of independent branches in another order, more or fewer packs, noise within tolerance
    compiled = [E[0], E[2], E[1], E[3], E[4], ("forward", "saved.pack", 1.0), ("forward", "saved.pack", 1.0),
                ("backward", "saved.unpack", 1.0), ("backward", "saved.unpack", 1.0)]
    assert autograd_trace.check(_outcome(E, compiled)).status.value == "pass"
    # no pack at all: the compiled graph may save nothing (code no gradient needs is dropped)
    unsaved = [r for r in E if not r[1].startswith("saved.")]
    assert autograd_trace.check(_outcome(E, unsaved)).status.value == "pass"
    noisy = [(p, lab, [3.0000001] if v == [3.0] else v) for p, lab, v in E]
    assert autograd_trace.check(_outcome(E, noisy)).status.value == "pass"
    assert autograd_trace.check(_outcome([], [])).status.value == "pass"


def test_a_refusal_torch_documents_is_counted_apart_not_found():
    outcome = run_program(_program("grad.double"), run_config("aot_eager", ("differential",)))
    assert outcome.compiled.failure is not None and "double backward" in outcome.compiled.failure.message
    verdict = differential.check(outcome)
    assert verdict.status.value == "inconclusive" and verdict.kind == "unsupported", verdict


def test_the_mutation_operator_gives_and_takes_and_the_reducer_takes_away():
    rng = random.Random(0)
    plain = _program()
    given_ = {m.options.autograd for m in (mutate(plain, "hook", rng) for _ in range(30)) if m is not None}
    assert any(given_) and all(len(a) == 1 for a in given_)
    hooked = _program("tensor.observe", "saved.pair")
    taken = [m for m in (mutate(hooked, "hook", rng) for _ in range(30)) if m is not None]
    assert any(len(m.options.autograd) < 2 for m in taken)
    assert any(label == "autograd" and c is not None and c.options.autograd == ("saved.pair",)
               for label, c in proposals(hooked))


@pytest.mark.parametrize("fault, feature", [("saved_on_cpu_in_bfloat16", "saved.cpu"),
                                            ("gradient_edge_of_a_view", "grad.edge")])
def test_a_fault_eager_shares_is_seen_against_the_program_without_the_feature(fault, feature, tmp_path):
    """A fault in torch's saved-tensor or gradient-edge machinery that eager and the compiled run share: they
    agree, so only eager against the same program without the feature (which torch promises changes nothing)
    sees it; without the fault that passes. The finding's repro (the transparent driver: the program without
    its features embedded) exits 1 under the fault and 0 without (the differential driver it had compared
    eager with compiled, and exited 0 on every such finding: seed 97)."""
    from pathlib import Path

    from harness import warm
    from reports.repro import driver_for, render_repro

    from .planted_autograd import FAULTS

    program = _program(feature, kind="function")
    with FAULTS[fault]():
        outcome = run_program(program, RunConfig(backend="eager", dedup=False))
    assert differential.check(outcome).status is Status.PASS
    verdict = autograd_trace.check(outcome)
    assert verdict.failed and verdict.kind == "transparent" and verdict.where.startswith("grad["), verdict
    honest = run_program(program, RunConfig(backend="eager", dedup=False))
    assert honest.plain_eager is not None and autograd_trace.check(honest).status is Status.PASS
    check, variant = driver_for(verdict.details or {}, "wrong", verdict.oracle, verdict.kind)
    assert check == "transparent"
    repro = tmp_path / "repro.py"
    repro.write_text(render_repro(program, outcome.config, "transparent", check, variant))
    root = str(Path(__file__).resolve().parent.parent)
    under = (f"import runpy, sys; sys.path.insert(0, {root!r}); from suites.planted_autograd import FAULTS; "
             f"_fault = FAULTS[{fault!r}](); _fault.__enter__(); sys.argv = [{str(repro)!r}]; "
             f"runpy.run_path({str(repro)!r}, run_name='__main__')")
    runs = {name: warm.run(args, cwd=str(tmp_path), timeout=300)
            for name, args in (("clean", [str(repro)]), ("fault", ["-c", under]))}
    assert runs["clean"].returncode == 0, runs["clean"].stdout[-3000:] + runs["clean"].stderr[-3000:]
    assert runs["fault"].returncode == 1, runs["fault"].stdout[-3000:] + runs["fault"].stderr[-3000:]


@pytest.mark.parametrize("feature", ["tensor.observe", "grad.edge"])
def test_a_tensor_subclass_the_program_defines_is_the_same_class_in_the_program_without_its_features(feature):
    """The program without its features is a source of its own, whose TensorSub is another class object: the
    transparent check takes it as eager's class of that name (a nightly property run called it a difference).
    Gradients asked for with torch.autograd.grad come back through the leaf's __torch_function__, as TensorSub,
    where backward() leaves a plain tensor in .grad (seed 97: grad.edge and grad.subset read as differences)."""
    program = _program(feature, kind="function")
    section = program.sections[0]
    program = replace(program, sections=(replace(section, structure="calls", calls=(Call(how="type:tensor_subclass"),) * 3),))
    outcome = run_program(program, RunConfig(backend="eager", dedup=False))
    assert type(outcome.eager.outputs[0]).__name__ == "TensorSub" and outcome.plain_eager is not None
    assert autograd_trace.check(outcome).status is Status.PASS
    if feature == "grad.edge":
        assert {type(g).__name__ for g in outcome.eager.grads.values() if g is not None} == {"TensorSub"}
        assert {type(g).__name__ for g in outcome.plain_eager.grads.values() if g is not None} == {"Tensor"}


@st.composite
def _hooked(draw):
    """A drawn program given one autograd feature that fits it."""
    program = draw(programs(edges=True))
    fit = fitting_autograd(replace(program, options=replace(program.options, autograd=())))
    if not fit:
        return program
    chosen = draw(st.sampled_from(fit))
    return replace(program, options=replace(program.options, autograd=(chosen,)))


# No false alarms: the family on a pipeline with nothing to get wrong but Dynamo and the eager backend
# (deduplication off); only recorded issues may fail. 2 programs in the gate (4 until issue 42's cut to six
# minutes: 9 s), 40 nightly.
@pytest.mark.property
@settings(max_examples=_share(1, 10, 4, gate=2), deadline=None, suppress_health_check=list(HealthCheck))
@given(_hooked())
def test_the_family_raises_no_false_alarm_on_a_correct_pipeline(program):
    from suites.test_property import assert_only_known_findings

    assert_only_known_findings(program, "eager", dedup=False)


def test_a_campaign_share_gives_a_fitting_feature_by_program_id():
    from generators.autograd import assign

    fit = ["tensor.observe", "saved.pair"]
    given = [assign(f"{i}:autograd", 0.5, fit) for i in range(400)]
    assert 150 < sum(bool(g) for g in given) < 250 and set(given) == {"", *fit}
    assert assign("7:autograd", 0.5, fit) == assign("7:autograd", 0.5, fit)  # the same for every run of a seed
    assert not any(assign(f"{i}:autograd", 0.0, fit) for i in range(100)) and not assign("1", 1.0, [])


@pytest.mark.parametrize("name", ["module.global_forward", "module.global_backward"])
def test_a_global_module_hook_lets_the_first_entry_serve_the_same_call_again(name):
    """Dynamo guards the global hook dicts (their handles and hooks): hooks registered afresh around each run
    recompiled every call, and the harness's check of the first entry, made between runs, found them gone
    (``len(..._global_forward_hooks) != 1``): the recompiles oracle called the same call a recompile. Put back
    under the same handles around each run, and checked as a call finds them, the first entry serves it."""
    from oracles.registry import judge

    outcome = run_program(_program(name), run_config("aot_eager", ("guards", "recompiles")))
    # (None: the frame has no entry of its own: with a backward hook Dynamo compiles the blocks' frames)
    assert outcome.capture.original_accepts_original is not False, outcome.capture.original_rejects_because
    assert not [v for v in judge(outcome, ("guards", "recompiles")) if v.failed]


def test_full_backward_hooks_give_zeros_where_the_program_without_them_gives_none():
    """Seed 99: module inputs routed through full backward hooks (BackwardHookFunction) get a gradient of zeros where
    no output reaches them; the program without the hooks leaves None. Zeros for None pass, any other value not."""
    from pathlib import Path

    from generators.ir import Program

    program = Program.from_json((Path(__file__).parent / "data" / "global_backward_hook_zero_grad.json").read_text())
    assert "module.global_backward" in program.options.autograd
    outcome = run_program(program, RunConfig(backend="aot_eager", dedup=True))
    assert any(g is None for g in outcome.plain_eager.grads.values())
    verdict = autograd_trace.check(outcome)
    assert not (verdict.failed and verdict.kind == "transparent"), verdict
    assert autograd_trace._zeros_for_none(None, torch.zeros(2), True).shape == (2,)
    assert autograd_trace._zeros_for_none(None, torch.ones(2), True) is None
    assert autograd_trace._zeros_for_none(None, torch.zeros(2), False) is None
