"""The differential oracle: near-equal values pass, planted faults are caught."""

from __future__ import annotations

import pytest
import torch

from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec
from harness.outcome import Execution, Failure, Outcome, RunConfig, Capture
from harness.pipeline import run_program
from oracles import differential
from oracles.compare import compare
from oracles.verdict import Status

pytestmark = pytest.mark.unit


def _x(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def test_near_equal_values_pass():
    exp = torch.linspace(-3, 3, 50)
    assert compare(exp, exp + 1e-6, exp.double()) is None


def test_compiled_as_noisy_as_eager_passes_via_fp64_referee():
    ref = torch.linspace(1e4, 2e4, 64, dtype=torch.float64)
    eager = (ref + 0.5).float()  # eager itself is 0.5 off
    compiled = (ref - 0.6).float()  # so is compiled, about as much
    assert compare(eager, compiled, ref) is None


def test_one_element_off_by_1e_3_fails_even_in_a_large_tensor():
    exp = torch.randn(10_000)
    act = exp.clone()
    act[1234] += 1e-3
    diff = compare(exp, act, exp.double())
    assert diff is not None and diff.kind == "mismatch"
    assert diff.details["index"] == [1234]


@pytest.mark.parametrize(
    "exp, act, kind",
    [
        (_x(1.0, 2.0), _x(1.0, 2.0, dtype=torch.float64), "dtype"),
        (_x(1.0, 2.0), _x(1.0, 2.0, 3.0), "shape"),
        (_x(1.0, 2.0), None, "missing"),
        (None, _x(1.0), "unexpected"),
        (torch.tensor([1, 2]), torch.tensor([1, 3]), "mismatch"),
        (torch.tensor([True]), torch.tensor([False]), "mismatch"),
        (_x(1.0, 2.0), _x(1.0, float("nan")), "mismatch"),
        (_x(1.0), 1.0, "type"),
        (3, 4, "value"),
    ],
)
def test_planted_differences_are_caught(exp, act, kind):
    ref = exp.double() if isinstance(exp, torch.Tensor) and exp.is_floating_point() else exp
    diff = compare(exp, act, ref)
    assert diff is not None and diff.kind == kind


def test_integers_compare_exactly():
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 2]), torch.tensor([1, 2])) is None


def test_non_finite_reference_is_inconclusive_not_a_pass():
    diff = compare(_x(1.0, float("inf")), _x(1.0, 5.0), _x(1.0, float("inf")).double())
    assert diff is not None and diff.inconclusive


def _outcome(eager, again, compiled, ref=None) -> Outcome:
    body = (Stmt("v0", "neg", (Ref("x"),)),)
    program = Program(
        (("x", TensorSpec((2,))),),
        Block("function", ("x",), (), (), (), body, "v0"),
        (Section("for_range", "chain", (Call(), Call())),),
    )
    return Outcome(program, RunConfig(), "", eager, again, ref or eager, compiled, Capture())


def _run(*outs, grads=None, rg=None, state=None):
    return Execution(
        outputs=list(outs), requires_grad=rg or [False] * len(outs), treespec="spec", grads=grads or {},
        state=state or {},
    )


def test_nondeterministic_eager_skips_numerics():
    v = differential.check(_outcome(_run(_x(1.0)), _run(_x(2.0)), _run(_x(9.0))))
    assert v.status is Status.INCONCLUSIVE and v.kind == "nondeterministic"


def test_compiled_crash_is_its_own_kind():
    crashed = Execution(failure=Failure("backend_compile", "BackendCompilerFailed", "boom"))
    v = differential.check(_outcome(_run(_x(1.0)), _run(_x(1.0)), crashed))
    assert v.failed and v.kind == "crash" and v.where == "backend_compile"


def test_dropped_gradient_is_a_failure():
    g = {"input:x": _x(1.0)}
    v = differential.check(_outcome(_run(_x(1.0), grads=g), _run(_x(1.0), grads=g), _run(_x(1.0), grads={"input:x": None})))
    assert v.failed and v.kind == "missing_grad" and v.where == "grad[input:x]"


def test_mutated_inputs_and_buffers_are_compared():
    before, after = {"input:y0": _x(1.0, 2.0)}, {"input:y0": _x(2.0, 4.0)}
    v = differential.check(_outcome(_run(_x(1.0), state=after), _run(_x(1.0), state=after), _run(_x(1.0), state=before)))
    assert v.failed and v.where == "state[input:y0]"


def test_missing_float64_reference_falls_back_to_tolerance():
    close, far = _x(1.0, 2.0), _x(1.0, 2.5)
    outcome = _outcome(_run(close), _run(close), _run(far))
    outcome.reference = None
    assert differential.check(outcome).failed
    outcome.compiled = _run(close)
    assert differential.check(outcome).status is Status.PASS


def test_every_output_is_checked_not_just_the_first():
    good, bad = _x(1.0, 2.0), _x(1.0, 2.5)
    v = differential.check(_outcome(_run(good, good), _run(good, good), _run(good, bad)))
    assert v.failed and v.where == "output[1]"


# --- planted faults through the real pipeline -------------------------------

PLANTED_PROGRAM = Program(
    inputs=(("x", TensorSpec((3, 4), "float32", True)),),
    block=Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "tanh", (Ref("v0"),))), "v1"),
    sections=(Section("calls", "chain", (Call(), Call())),),
)


@pytest.mark.parametrize(
    "backend, kinds",
    [
        ("suites.planted:perturb_one_element", {"mismatch"}),
        ("suites.planted:wrong_dtype", {"dtype"}),
        ("suites.planted:drop_gradient", {"requires_grad", "missing_grad"}),
    ],
)
def test_planted_backend_faults_are_caught(backend, kinds):
    outcome = run_program(PLANTED_PROGRAM, RunConfig(backend=backend, dedup=False))
    verdict = differential.check(outcome)
    assert verdict.failed, verdict
    assert verdict.kind in kinds, verdict


def test_honest_backend_passes_the_planted_program():
    outcome = run_program(PLANTED_PROGRAM, RunConfig(backend="aot_eager"))
    assert differential.check(outcome).status is Status.PASS
    assert outcome.capture.deduplicated and outcome.capture.region_groups


def test_precision_floor_loosens_only_to_the_least_precise_step():
    """A float64 result of a float32 reduction is float32-accurate: a float32
    rounding difference passes with the floor and fails without it; a real
    error fails either way."""
    from oracles.compare import compare

    exp = torch.tensor([1.0, -1.0625], dtype=torch.float64)
    rounding = exp + torch.tensor([0.0, 5e-7], dtype=torch.float64)
    assert compare(exp, rounding, exp) is not None
    assert compare(exp, rounding, exp, floor=torch.float32) is None
    assert compare(exp, exp + 0.01, exp, floor=torch.float32).kind == "mismatch"


def test_lowest_precision_sees_casts_inside_ops():
    from generators.check import lowest_precision
    from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec

    body = (Stmt("v0", "merge_mean", (Ref("x"), Ref("x"))),)
    p = Program((("x", TensorSpec((3,), "float64")),), Block("function", ("x",), (), (), (), body, "v0"),
                (Section("calls", "chain", (Call(), Call())),))
    assert lowest_precision(p) == "float32"
    plain = Program(p.inputs, Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),)),), "v0"), p.sections)
    assert lowest_precision(plain) == "float64"
