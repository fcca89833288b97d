"""The CUDA-graph oracle: replays, stale outputs and engagement.

On CPU (CI): the replay harness and the oracle, fed by backends planted to
reuse output buffers or to replay stale values, by torch's own ``cudagraphs``
backend (which skips CPU graphs and says why), and by a control backend over
drawn programs and plans (no false alarms). With CUDA (``pytest suites/ -m
gpu``): the oracle over drawn programs on ``reduce-overhead`` and
``cudagraphs``, and positive controls that CUDA graphs engage at all.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings

from suites.pytest_plugin import record_known_hit, record_line
from suites.tiers import ci_profile
from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec
from generators.replays import ReplayPlan, Resize, check_plan, default_plan, replayable
from harness.outcome import Failure, RunConfig
from harness.replay import OVERWRITTEN, run_replay
from oracles import cudagraph
from oracles.verdict import Status
from reports.repro import render_repro
from reports.triage import known_issue, triage_replay
from reports.unmask import unmasked_runs
from harness import warm

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "suites.planted_cudagraphs:"
HAS_CUDA = torch.cuda.is_available()
NO_CUDA = "needs CUDA: torch.cuda.is_available() is False here (CPU-only torch or no GPU); " \
          "run `pytest suites/ -m gpu` on a machine with an NVIDIA GPU and a CUDA build of torch"

# x -> tanh(sin(x)) twice, x requires grad: outputs and an input gradient.
SIN_TANH = Program(
    inputs=(("x", TensorSpec((3, 4), "float32", True)),),
    block=Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "tanh", (Ref("v0"),))), "v1"),
    sections=(Section("calls", "chain", (Call(), Call())),),
)
PLAN = ReplayPlan(calls=4, backward=True)


def _replay(backend: str, plan: ReplayPlan = PLAN, program: Program = SIN_TANH, dedup: bool = True, **kw):
    return run_replay(program, plan, backend=backend, plain=kw.pop("plain", "aot_eager"),
                      device=kw.pop("device", "cpu"), dedup=dedup, **kw)


def _failed(replay) -> list:
    return [v for v in cudagraph.verdicts(replay) if v.failed]


# --- planted faults on CPU ------------------------------------------------------

@pytest.mark.unit
def test_reused_output_buffers_are_stale_outputs():
    replay = _replay(PLANTED + "reused_buffers")
    bad = _failed(replay)
    assert bad and {v.kind for v in bad} == {"stale_output"}, bad
    wheres = {v.where for v in bad}
    assert "call[0]:output[0]" in wheres and "call[0]:grad[input:x]" in wheres, wheres
    assert {v.details["call"] for v in bad} == {0, 1, 2}  # each call's results, overwritten by the next
    assert all(v.details["max_abs_change"] > 0 for v in bad)


@pytest.mark.unit
def test_a_result_overwritten_by_a_second_call_in_the_same_step_is_caught():
    """torch's documented ``cudagraph_mark_step_begin(); f(x) + f(x)``: the
    first call's results stay live until the next step."""
    plan = ReplayPlan(calls=3, backward=False, mark_step=True, twice=True)
    bad = _failed(_replay(PLANTED + "reused_buffers", plan))
    assert "overwritten_in_step" in {v.kind for v in bad}, bad
    assert any(v.where == "call[0]:output[0]:same-step" for v in bad), [v.where for v in bad]
    good = _replay("aot_eager", plan)
    assert not _failed(good) and any(h.same_step for h in good.held)
    assert [c.phase for c in good.calls] == ["warmup", "warmup:same-step", "record", "record:same-step",
                                             "replay", "replay:same-step"]


@pytest.mark.unit
def test_replays_that_ignore_fresh_inputs_are_wrong_from_the_first_replay():
    replay = _replay(PLANTED + "frozen_replay")
    bad = _failed(replay)
    assert bad and {v.kind for v in bad} == {"mismatch"}, bad
    assert {v.details["phase"] for v in bad} == {"replay"}  # warm-up and recording computed
    assert {v.details["call"] for v in bad} == {2, 3}
    assert all(v.details["plain_agrees"] and not v.details["graphed_matches_plain"] for v in bad)
    values = {v.details["value"].split("[")[0] for v in bad}
    assert values == {"output", "grad"}, values


@pytest.mark.unit
def test_documented_overwrite_error_passes_and_other_errors_do_not():
    replay = _replay("aot_eager")
    assert not _failed(replay)
    i = next(i for i, h in enumerate(replay.held) if h.role == "graphed")
    first = replay.held[i]
    documented = f"RuntimeError: Error: accessing tensor output of CUDAGraphs that has been {OVERWRITTEN}. Stack trace: ..."
    replay.held[i] = dataclasses.replace(first, value=None, raised=documented)
    assert not _failed(replay)
    replay.held[i] = dataclasses.replace(first, value=None, raised="RuntimeError: invalid storage")
    assert [v.kind for v in _failed(replay)] == ["read_error"]
    replay.held[i] = dataclasses.replace(first, value=first.value + 1)
    assert [v.kind for v in _failed(replay)] == ["stale_output"]


@pytest.mark.unit
def test_a_crash_in_a_replay_names_the_call_and_phase():
    replay = _replay("aot_eager")
    crash = Failure("runtime", "RuntimeError", "CUDA error: an illegal memory access was encountered")
    replay.calls[2].runs["graphed"] = dataclasses.replace(replay.calls[2].runs["graphed"], failure=crash)
    v = cudagraph.check(replay)
    assert v.failed and v.kind == "crash" and v.where == "call[2]:replay", v
    assert cudagraph.check_engaged(replay).kind == "crashed"


@pytest.mark.unit
def test_torch_cudagraphs_backend_on_cpu_is_a_skip_with_its_reason_not_a_pass():
    replay = _replay("cudagraphs")
    assert not _failed(replay)  # CPU graphs run uncaptured, and right
    e = cudagraph.check_engaged(replay)
    assert e.status is Status.INCONCLUSIVE and e.kind == "skipped", e
    assert "skipping cudagraphs due to" in e.message and "cpu" in e.message, e.message
    assert replay.engagement.skip_count >= 1


@pytest.mark.inductor
def test_reduce_overhead_takes_the_cuda_graph_path_and_on_cpu_says_it_skips():
    """The built-in ``reduce-overhead`` reaches inductor's CUDA-graph code: on
    CPU graphs it counts a skip (and, for a graph with no CUDA device, logs no
    reason); with the mode lost on the way it would count nothing."""
    replay = _replay("reduce-overhead", ReplayPlan(calls=3, backward=False), plain=None)
    assert replay.plain == "inductor" and not _failed(replay)
    e = cudagraph.check_engaged(replay)
    # one graph, one skip: the plain inductor compile beside it must not try CUDA graphs
    assert e.kind == "skipped" and replay.engagement.skip_count == 1, e


@pytest.mark.unit
def test_a_planted_skip_is_recorded_with_its_reason():
    e = cudagraph.check_engaged(_replay(PLANTED + "planted_skip"))
    assert e.kind == "skipped" and e.details["reasons"] == ["skipping cudagraphs due to planted reason"], e


@pytest.mark.unit
def test_dispatch_state_a_compile_leaves_behind_is_caught_and_undone():
    """KI-015: a view under inference_mode crashes AOTAutograd and leaves
    Python dispatch keys on; the replay records it, undoes it (eager code
    after it would assert), and names it as the hygiene oracle does."""
    from harness.hygiene import leaked_state
    from reports.known_issues import ROOT

    program = Program.from_json((next(ROOT.glob("KI-015-*")) / "program.json").read_text())
    replay = run_replay(program, ReplayPlan(calls=3), backend="aot_eager", plain="aot_eager", device="cpu")
    assert not leaked_state()
    leak = [v for v in cudagraph.verdicts(replay) if v.kind == "leaked_state"]
    assert leak and leak[0].details["label"].startswith("leak:Python"), cudagraph.verdicts(replay)
    finding = triage_replay(replay, leak[0])
    assert finding.extra["equivalent"].startswith("hygiene:leaked_state:") and known_issue(finding).id == "KI-015"


@pytest.mark.unit
def test_without_a_skip_on_cpu_engagement_is_unobservable_not_a_pass():
    e = cudagraph.check_engaged(_replay("aot_eager"))
    assert e.status is Status.INCONCLUSIVE and e.kind == "unobservable", e


@pytest.mark.unit
def test_static_inputs_resize_and_mark_step_run_and_pass_on_a_correct_backend():
    plan = ReplayPlan(calls=5, backward=True, static_inputs=(), resize=Resize(2, "x", (3, 5)), mark_step=True)
    replay = _replay("aot_eager", plan)
    assert [c.phase for c in replay.calls] == ["warmup", "record", "resize", "replay-after-resize", "replay-after-resize"]
    assert replay.calls[2].shapes == {"x": [3, 5]} and replay.calls[3].shapes == {"x": [3, 4]}
    assert not _failed(replay)
    static = _replay("aot_eager", ReplayPlan(calls=3, static_inputs=("x",)))
    assert not _failed(static) and len(static.calls) == 3


@pytest.mark.unit
def test_a_result_that_changes_in_eager_too_is_not_stale():
    """x static and returned as it is: writing the next call's values into x
    changes the first call's result in eager too; that is aliasing, not a
    stale CUDA-graph output."""
    identity = dataclasses.replace(SIN_TANH, block=dataclasses.replace(
        SIN_TANH.block, body=(Stmt("v0", "contiguous", (Ref("x"),)),), result="v0"))
    replay = _replay("aot_eager", ReplayPlan(calls=3, backward=False, static_inputs=("x",)), identity, dedup=False)
    assert not _failed(replay), [str(v) for v in _failed(replay)]
    changed = [h for h in replay.held if h.role == "eager" and h.where == "output[0]"]
    assert changed and not torch.equal(changed[0].value, replay.calls[0].runs["eager"].outputs[0])


@pytest.mark.unit
def test_static_inputs_are_written_in_place_and_keep_their_address():
    seen: list[int] = []

    def watch(gm, example_inputs):
        def run(*args):
            seen.append(args[0].data_ptr())
            return gm(*args)
        return run

    plan = ReplayPlan(calls=3, backward=False, static_inputs=("x",))
    replay = run_replay(SIN_TANH, plan, backend="aot_eager", plain="eager", device="cpu")
    assert not _failed(replay)
    from harness import backends

    backends.BUILTIN["_watch"] = backends.Backend("_watch", watch)
    try:
        replay = run_replay(SIN_TANH, plan, backend="_watch", plain="eager", device="cpu")
    finally:
        del backends.BUILTIN["_watch"]
    assert not _failed(replay)
    assert len(seen) == 3 and len(set(seen)) == 1, seen  # one tensor, three calls' values


@pytest.mark.unit
def test_replays_run_without_tf32_and_put_the_settings_back():
    from harness.replay import full_float32

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        with full_float32():
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@pytest.mark.unit
@pytest.mark.parametrize("plan, error", [
    (ReplayPlan(calls=2), "at least 3 calls"),
    (ReplayPlan(static_inputs=("nope",)), "cannot be static"),
    (ReplayPlan(resize=Resize(1, "x", (3, 5))), "bad resize"),
    (ReplayPlan(resize=Resize(2, "nope", (3,))), "bad resize"),
])
def test_bad_plans_are_clear_errors(plan, error):
    with pytest.raises(ValueError, match=error):
        check_plan(SIN_TANH, plan)


@pytest.mark.unit
def test_plans_round_trip_json():
    plan = ReplayPlan(5, False, ("x",), Resize(3, "y", (2, 3)), True)
    assert ReplayPlan.from_dict(plan.to_dict()) == plan
    with pytest.raises(ValueError, match="twice needs mark_step"):
        check_plan(SIN_TANH, ReplayPlan(twice=True))
    with pytest.raises(ValueError, match="unknown replay plan fields"):
        ReplayPlan.from_dict({"calls": 3, "replays": 2})
    assert check_plan(SIN_TANH, default_plan(SIN_TANH))


@pytest.mark.unit
def test_triage_blames_cuda_graphs_and_names_the_phase():
    replay = _replay(PLANTED + "frozen_replay")
    finding = triage_replay(replay, cudagraph.check(replay))
    assert finding.signature == "cudagraph:mismatch:cudagraphs:replay:output", finding.signature
    stale = _replay(PLANTED + "reused_buffers")
    assert triage_replay(stale, cudagraph.check(stale)).signature == "cudagraph:stale_output:cudagraphs:warmup:output"


@pytest.mark.unit
@pytest.mark.parametrize("issue, backend, kind, equivalent", [
    ("KI-002", "eager", "crash", "differential:crash:dedup:backward:AssertionError: fake_mode"),
    ("KI-001", "aot_eager", "mismatch", "differential:mismatch:dedup:arg:float"),
])
def test_a_failure_the_plain_compile_shares_is_the_known_torch_bug_it_is(issue, backend, kind, equivalent):
    """A known dedup bug (KI-002: backward through invoke_subgraph on
    'eager'; KI-001: float constants merged) fails the graphed and the plain
    run alike: not CUDA graphs' fault, and the finding carries the
    differential signature the baseline lists."""
    from reports.known_issues import ROOT

    program = Program.from_json((next(ROOT.glob(f"{issue}-*")) / "program.json").read_text())
    replay = run_replay(program, ReplayPlan(calls=3), backend=backend, plain=backend, device="cpu")
    verdict = cudagraph.check(replay)
    assert verdict.kind == kind, verdict
    finding = triage_replay(replay, verdict)
    assert finding.culprit == "dedup" and finding.signature.startswith(f"cudagraph:{kind}:dedup:warmup:"), finding.signature
    assert finding.extra["equivalent"].startswith(equivalent), finding.extra
    assert known_issue(finding).id == issue


@pytest.mark.unit
def test_the_equivalent_signature_is_matched_on_the_plain_backend():
    """reduce-overhead's plain compile is inductor: a wrong gradient both share is inductor's known issue
    (KI-044, recorded on inductor), found new on a GPU until the equivalent was matched on the plain backend."""
    from reports.known_issues import ROOT
    from reports.triage import Finding
    from oracles.verdict import Verdict

    program = Program.from_json((next(ROOT.glob("KI-044-*")) / "program.json").read_text())
    finding = Finding("cudagraph:mismatch:backend:warmup:grad:compile_region", Verdict("cudagraph", Status.FAIL),
                      program, RunConfig(backend="reduce-overhead"), "backend", "",
                      extra={"equivalent": "differential:mismatch:backend:compile_region", "plain": "inductor"})
    assert known_issue(finding).id == "KI-044"
    finding.extra["plain"] = "aot_eager"  # KI-044 is inductor's alone
    assert known_issue(finding) is None


@pytest.mark.unit
@pytest.mark.parametrize("backend, plan, status", [
    (PLANTED + "reused_buffers", PLAN, 1),
    (PLANTED + "frozen_replay", ReplayPlan(calls=5, resize=Resize(2, "x", (3, 5))), 1),
    ("aot_eager", ReplayPlan(calls=4, static_inputs=("x",), mark_step=True), 0),
    (PLANTED + "reused_buffers", ReplayPlan(calls=3, backward=False, mark_step=True, twice=True), 1),
])
def test_replay_repro_runs_standalone(tmp_path, backend, plan, status):
    repro = render_repro(SIN_TANH, RunConfig(backend=backend), "cudagraph test", "replay",
                         replay={"plan": plan.to_dict(), "device": "cpu"})
    path = tmp_path / "repro.py"
    path.write_text(repro)
    done = warm.run([str(path)], cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == status, done.stdout + done.stderr
    assert ("REPRODUCED" in done.stdout) == (status == 1), done.stdout


# --- the replay harness over drawn programs, on a correct backend --------------

# 2 in the gate (4 until issue 42's cut to six minutes: 8 s), the profile's twelfth nightly
@pytest.mark.unit
@settings(max_examples=2 if ci_profile() else max(4, settings.default.max_examples // 12))
@given(replayable(max_stmts=4))
def test_no_false_alarms_over_drawn_programs_and_plans(case):
    """Deduplication off, so known pass bugs stay out: what is tested is the
    replay harness itself (fresh inputs per call, static inputs, resizes,
    held results, step marks) against eager. Dynamo's and
    nested_compile_region's own bugs stay in (a decorated body returning its
    input written in place is KI-005): a failure passes only if the baseline
    names it (by its signature or, shared by the plain compile, the
    differential one), and a known crash with triggers is replayed again
    without them."""
    program, plan = case
    crashes = _only_known_replay_findings(program, plan)
    for _, unmasked, _, _ in unmasked_runs(program, RunConfig(backend="aot_eager", dedup=False), crashes,
                                                 (cudagraph.NAME,)):
        _only_known_replay_findings(unmasked, plan)


def _only_known_replay_findings(program, plan) -> list:
    # plain: the same backend without CUDA graphs, as on CUDA (a bug of
    # aot_eager's own, KI-022, must not be blamed on CUDA graphs)
    replay = run_replay(program, plan, backend="aot_eager", plain="aot_eager", device="cpu", dedup=False)
    verdict = cudagraph.check(replay)
    if not verdict.failed:
        return []
    finding = triage_replay(replay, verdict)
    issue = known_issue(finding)
    assert issue is not None, [finding.signature] + [str(v) for v in _failed(replay)]
    record_known_hit(issue.id, finding.signature)
    return [(issue, verdict.oracle, verdict.kind == "crash")]


# --- on CUDA ------------------------------------------------------------------

GPU_EXAMPLES = 100  # per backend: 200 programs in all


def assert_only_known_cudagraph_findings(program, plan, backend, device="cuda"):
    replay = run_replay(program, plan, backend=backend, device=device)
    engaged = cudagraph.check_engaged(replay)
    record_line("cudagraphs", backend, engaged.status.value, engaged.kind or "engaged", engaged.where)
    verdict = cudagraph.check(replay)
    if not verdict.failed:
        return
    finding = triage_replay(replay, verdict)
    issue = known_issue(finding)
    if issue is not None:
        record_known_hit(issue.id, finding.signature)
        return
    repro = render_repro(program, finding.config, finding.signature, "replay",
                         replay={"plan": plan.to_dict(), "device": device})
    raise AssertionError(f"new finding {finding.signature}\n{verdict}\n\nprogram.json: {program.to_json()}"
                         f"\n\nplan: {plan.to_dict()}\n\nrepro.py:\n{repro}")


@pytest.mark.property
# 2 programs in the gate (4 until issue 42's cut to six minutes: 16 s), the profile's twelfth nightly
@settings(max_examples=2 if ci_profile() else max(4, settings.default.max_examples // 12))
@given(replayable(max_stmts=5))
def test_cudagraph_oracle_on_cpu_with_torch_cudagraphs_backend(case):
    """What the GPU suite does, on CPU: torch's cudagraphs backend skips CPU
    graphs (so this is AOTAutograd with deduplication, replayed), and every
    failure must be a known torch bug, by its own or its equivalent signature."""
    assert_only_known_cudagraph_findings(*case, "cudagraphs", device="cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA)
@pytest.mark.parametrize("backend", ["reduce-overhead", "cudagraphs"])
def test_cuda_graphs_engage_on_a_plain_program(backend):
    replay = _replay(backend, PLAN, device="cuda", plain=None)
    known = [(v, known_issue(triage_replay(replay, v))) for v in _failed(replay)]  # a recorded torch bug (KI-153)
    for v, issue in known:
        if issue is not None:
            record_known_hit(issue.id, v.kind)
    assert not [v for v, issue in known if issue is None], [str(v) for v, issue in known if issue is None]
    e = cudagraph.check_engaged(replay)
    assert e.status is Status.PASS and e.details["recorded"] >= 1, e
    # call i's results, read after call i + 1: PyTorch's documented error
    assert any(OVERWRITTEN in h.raised for h in replay.held), replay.held


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA)
@settings(max_examples=GPU_EXAMPLES)
@given(replayable(max_stmts=5))
def test_cudagraph_oracle_reduce_overhead(case):
    assert_only_known_cudagraph_findings(*case, "reduce-overhead")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA)
@settings(max_examples=GPU_EXAMPLES)
@given(replayable(max_stmts=5))
def test_cudagraph_oracle_cudagraphs_backend(case):
    assert_only_known_cudagraph_findings(*case, "cudagraphs")
