"""Backends nobody here wrote: what they can do is found by asking them, and
the oracles judge each for what it claims (harness.backend_capabilities)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from campaigns.localize import localize
from generators.ir import Block, Call, Const, Program, Ref, Section, Stmt, TensorSpec
from generators.doors import with_door
from harness.backend_capabilities import probe, unfit
from harness.doors import run_door
from harness.pipeline import run_program
from oracles import differential
from oracles.registry import judge, judge_door, run_config
from oracles.verdict import Status
from reports.triage import triage
from harness import warm

pytestmark = pytest.mark.unit
P = "suites.planted_backends:"
ROOT = Path(__file__).resolve().parents[1]

PROGRAM = Program(
    inputs=(("x", TensorSpec((3, 8), "float32", True)),),
    block=Block("function", ("x",), (), (), (),
                (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "tanh", (Ref("v0"),)), Stmt("v2", "mul_scalar", (Ref("v1"), Const(2.0)))),
                "v2"),
    sections=(Section("calls", "chain", (Call(), Call(), Call())),),
)
PROGRAM64 = replace(PROGRAM, inputs=(("x", TensorSpec((3, 8), "float64", True)),))
GELU = replace(PROGRAM, block=replace(PROGRAM.block, body=(
    Stmt("v0", "gelu", (Ref("x"), Const("none"))), Stmt("v1", "tanh", (Ref("v0"),)),
    Stmt("v2", "mul_scalar", (Ref("v1"), Const(2.0))))))


def test_the_probe_finds_what_each_backend_can_do():
    inference, low, rejecting = probe(P + "inference_only"), probe(P + "bfloat16_inference"), probe(P + "rejects_gelu")
    assert not inference.training and "no autograd graph" in inference.why_not_training and not inference.precision
    assert "gradients" in inference.lost()
    assert not low.training and low.precision == {"float32": "bfloat16", "float64": "bfloat16"}
    assert rejecting.training and rejecting.rejects and not rejecting.precision
    # a wrong kernel is not mistaken for a lower precision: its error is in one element
    assert probe("suites.planted:perturb_one_element").precision == {}
    assert probe("aot_eager").training and probe("aot_eager").how_precision == "declared"


def test_a_wider_dtype_handed_back_is_a_wrong_answer_not_a_missing_dtype():
    """A runtime that hands float64 back as float32 does not run float64
    (its programs are not drawn); one that hands float32 back as float64
    runs float32, wrongly: its programs are drawn and the oracles judge them."""
    narrow = probe(P + "no_float64")
    assert "float64" not in narrow.dtypes and "float32" in narrow.dtypes
    assert unfit(PROGRAM64, narrow) == "dtype:float64" and not unfit(PROGRAM, narrow)
    wide = probe("suites.planted:wrong_dtype")
    assert set(wide.dtypes) == {"float32", "float64", "float16", "bfloat16"}, wide
    assert not unfit(PROGRAM, wide)
    verdict = differential.check(run_program(PROGRAM, run_config("suites.planted:wrong_dtype", ("differential",))))
    assert verdict.failed, verdict


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_an_inference_only_backend_is_judged_forward_only_in_both_modes(mode):
    config = run_config(P + "inference_only", mode=mode)
    assert config.mode == mode and not config.backward
    outcome = run_program(PROGRAM, config)
    assert all(not v.failed for v in judge(outcome)), [str(v) for v in judge(outcome) if v.failed]
    wrong = run_program(PROGRAM, run_config(P + "inference_only_wrong", mode=mode))
    verdict = differential.check(wrong)
    assert verdict.failed and verdict.kind == "mismatch", verdict


def test_in_train_mode_the_same_backend_fails_on_gradients():
    """Forward-only is what stands the gradient checks down, nothing else."""
    outcome = run_program(PROGRAM, replace(run_config("aot_eager"), backend=P + "inference_only"))
    assert differential.check(outcome).kind in ("requires_grad", "missing_grad")


def test_a_lower_precision_is_compared_at_that_precision_and_a_fault_beyond_it_is_caught():
    config = run_config(P + "bfloat16_inference")
    assert dict(config.precision) == {"float32": "bfloat16", "float64": "bfloat16"}
    assert differential.check(run_program(PROGRAM, config)).status is Status.PASS
    assert differential.check(run_program(PROGRAM, replace(config, precision=()))).failed  # at float32 it fails
    wrong = differential.check(run_program(PROGRAM, run_config(P + "bfloat16_inference_wrong")))
    assert wrong.failed and wrong.kind == "mismatch"


def test_a_door_run_is_compared_at_the_backends_precision_too():
    program = with_door(PROGRAM64, "dynamic:mark")
    run = run_door(program, run_config(P + "bfloat16_inference"))
    assert not [v for v in judge_door(run) if v.failed]
    assert [v for v in judge_door(run_door(program, run_config(P + "bfloat16_inference_wrong"))) if v.failed]


def test_programs_a_backend_cannot_test_are_not_given_to_it():
    low, rejecting = probe(P + "bfloat16_inference"), probe(P + "rejects_gelu")
    gt = replace(PROGRAM, block=replace(PROGRAM.block, body=(*PROGRAM.block.body[:2], Stmt("v2", "where", (Ref("v1"), Ref("x"), Ref("v0"))))))
    assert unfit(gt, low) == "rounding:where" and unfit(gt, rejecting) == "" and unfit(PROGRAM, low) == ""
    no64 = replace(rejecting, dtypes=("float32",))
    assert unfit(PROGRAM64, no64) == "dtype:float64"


def test_an_op_the_backend_rejects_is_unsupported_not_a_crash():
    config = run_config(P + "rejects_gelu")
    verdict = differential.check(run_program(GELU, config))
    assert verdict.status is Status.INCONCLUSIVE and verdict.kind == "unsupported", verdict
    assert differential.check(run_program(PROGRAM, config)).status is Status.PASS
    # a backend that falls back would have compiled it: the same error from it is a crash
    assert differential.check(run_program(GELU, replace(config, rejects=False))).kind == "crash"


def test_a_fault_of_the_backend_alone_is_blamed_on_the_backend():
    outcome = run_program(PROGRAM, run_config(P + "inference_only_wrong"))
    finding = triage(outcome, differential.check(outcome))
    where = localize(finding, upto=P + "inference_only_wrong")
    assert where.layer == P + "inference_only_wrong" and list(where.ladder) == ["eager", "aot_eager", where.layer]
    assert where.summary().startswith("layer backend:")


@pytest.mark.long(seconds=12)
def test_a_backend_that_aborts_or_hangs_on_the_probe_takes_down_its_child_not_the_caller():
    """It is taken as it presents itself (training, full precision), saying
    why it was not probed; the oracles then judge what it does. (The abort
    first: its child waits for the forkserver to import torch, if no campaign
    started it; the hang's deadline then counts the probe alone.)"""
    from harness.backend_capabilities import _PROBED, probe_isolated

    for backend, timeout, why in (("aborts", 120, "the probe exited -6"), ("hangs", 3, "the probe ran past 3 s")):
        spec = f"suites.planted:{backend}"
        caps = probe_isolated(spec, timeout=timeout)
        _PROBED.pop(spec)
        assert caps.training and not caps.precision and caps.how_precision == f"not probed: {why}", caps


@pytest.mark.parametrize("args, says", [
    # nightly since issue 42's cut to six minutes (10 s: the command's probe child imports torch): the one
    # below refuses a backend on its probe through the same path
    pytest.param(["--backend", P + "compiles_nothing"], "compiles nothing", marks=pytest.mark.nightly),
    # nightly since then too (8 s, the same probe child): the gate's bad campaign input keeps one error line a case
    pytest.param(["--backend", P + "inference_only", "--mode", "train"], "cannot train", marks=pytest.mark.nightly),
    (["--backend", "no_such_backend"], "unknown backend"),
    (["--backend", "aot_eager", "--mode", "sideways"], "invalid choice"),
])
def test_bad_backends_and_modes_are_one_line_before_any_program_runs(tmp_path, args, says):
    done = warm.run(["-m", "harness", "fuzz", *args, "--budget", "5", "--out", str(tmp_path / "run")], cwd=ROOT, timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and says in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "run" / "findings").exists()


def test_a_backend_whose_random_ops_ignore_the_seed_gets_no_program_that_draws():
    caps = probe(P + "unseeded_random")
    assert caps.training and not caps.seeded_random and "random" in caps.lost()
    dropout = replace(PROGRAM, block=replace(PROGRAM.block, body=(
        *PROGRAM.block.body[:2], Stmt("v2", "dropout", (Ref("v1"), Const(0.5))))))
    assert unfit(dropout, caps) == "random:dropout" and unfit(PROGRAM, caps) == ""
    assert probe(P + "inference_only").seeded_random


def test_the_low_precision_run_is_the_noise_a_lower_precision_backend_may_show():
    """Cancellation in bfloat16 leaves an absolute error no relative tolerance
    of the output allows; eager run in bfloat16 shows that error, and the
    compiled one may have as much, not ten times as much."""
    from oracles.compare import compare

    ref = torch.linspace(-1, 1, 64, dtype=torch.float64) * 1e-3  # small results of large terms
    low = (ref + 0.05 * torch.sin(torch.arange(64.0, dtype=torch.float64))).float()  # bfloat16's noise, say
    eager = ref.float()
    floor = torch.bfloat16
    assert compare(eager, low, ref, floor) is not None  # by tolerance alone: a false finding
    assert compare(eager, low, ref, floor, noise=low) is None
    assert compare(eager, (ref + 0.5).float(), ref, floor, noise=low) is not None
