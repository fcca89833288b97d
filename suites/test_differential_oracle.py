"""The differential oracle: near-equal values pass, planted faults are caught."""

from __future__ import annotations

import pytest
import torch

from generators.ir import Block, Call, Const, Program, Ref, Section, Stmt, TensorSpec
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


def test_a_few_bfloat16_ulps_where_eager_landed_on_fp64_is_noise_but_more_is_not():
    """Seed 92: a bfloat16 gradient summed in another order was 4 ulps (0.125 at 6.86) from eager, whose own value
    happened to be 0.02 from float64: the referee's 3 x eager's error + atol rejected it. The bound has the
    tolerance's relative term of fp64's magnitude too; twice that off still fails."""
    rest = torch.linspace(-8, 8, 63, dtype=torch.float64) + 0.01  # bfloat16 rounds these: eager noise of its own
    ref = torch.cat([torch.tensor([-6.85517], dtype=torch.float64), rest])
    eager = torch.cat([torch.tensor([-6.875]), rest.float()]).bfloat16()
    near = eager.clone()
    near[0] = -6.75
    assert compare(eager, near, ref) is None
    far = eager.clone()
    far[0] = -6.5
    wrong = compare(eager, far, ref)
    assert wrong is not None and wrong.kind == "mismatch"


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
        (_x(1.0, 2.0), _x(1.0, float("nan")), "nan"),
        (_x(1.0, float("nan")), _x(1.0, 2.0), "nan"),
        (_x(float("-inf")), _x(float("inf")), "inf"),
        (_x(-0.0, 1.0), _x(0.0, 1.0), "signed_zero"),
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


# --- edge values: NaN, infinities and signed zeros, judged by float64 --------

NAN, INF = float("nan"), float("inf")


def test_nan_where_eager_and_fp64_agree_is_determined():
    exp, ref = _x(1.0, NAN, 3.0), _x(1.0, NAN, 3.0).double()
    assert compare(exp, _x(1.0, NAN, 3.0), ref) is None
    diff = compare(exp, _x(1.0, 0.0, 3.0), ref)
    assert diff.kind == "nan" and not diff.inconclusive
    assert diff.details["index"] == [1] and diff.details["actual"] == 0.0
    assert diff.details["expected"] != diff.details["expected"] and diff.details["float64"] != diff.details["float64"]


def test_infinity_where_eager_and_fp64_agree_must_keep_its_sign():
    exp = _x(INF, -INF, 2.0)
    ref = exp.double()
    assert compare(exp, exp.clone(), ref) is None
    for act in (_x(INF, INF, 2.0), _x(INF, NAN, 2.0), _x(INF, -3e38, 2.0)):
        diff = compare(exp, act, ref)
        assert diff.kind == "inf" and diff.details["index"] == [1], act


def test_signed_zero_where_eager_and_fp64_agree_must_keep_its_sign():
    exp = torch.tensor([[-0.0, 0.0], [1.0, -0.0]])
    ref = exp.double()
    assert compare(exp, exp.clone(), ref) is None
    diff = compare(exp, exp.abs(), ref)
    assert diff.kind == "signed_zero" and diff.details["index"] == [0, 0] and diff.details["count"] == 2
    diff = compare(exp, torch.tensor([[-0.0, -0.0], [1.0, -0.0]]), ref)
    assert diff.kind == "signed_zero" and diff.details["index"] == [0, 1]


def test_a_nonzero_compiled_value_at_a_signed_zero_is_judged_by_tolerance():
    """Only a zero can have the wrong sign; a tiny nonzero value (an FMA's
    residue) is closeness business."""
    exp = _x(-0.0, 1.0)
    assert compare(exp, _x(1e-9, 1.0), exp.double()) is None
    assert compare(exp, _x(0.5, 1.0), exp.double()).kind == "mismatch"


def test_float32_underflow_to_zero_leaves_the_sign_undetermined():
    exp = _x(-0.0, 0.0, 1.0)  # float32 underflowed; float64 did not
    ref = torch.tensor([-1e-50, 1e-50, 1.0], dtype=torch.float64)
    assert compare(exp, _x(0.0, -0.0, 1.0), ref) is None
    # eager and float64 zeros of opposite signs settle nothing either
    assert compare(_x(-0.0), _x(0.0), torch.tensor([0.0], dtype=torch.float64)) is None


def test_eager_non_finite_where_fp64_is_finite_is_noise_not_a_failure():
    ref = torch.tensor([1.0, 2.0, 3.0e38, 4.0], dtype=torch.float64)
    exp = _x(1.0, NAN, INF, 4.0)  # eager lost precision; float64 did not
    assert compare(exp, _x(1.0, 2.0, 3.0e38, 4.0), ref) is None
    assert compare(exp, _x(1.0, -7.0, -INF, 4.0), ref) is None  # left out of every comparison
    # and the rest is still compared
    assert compare(exp, _x(1.0, 2.0, 3.0e38, 4.5), ref).details["index"] == [3]


def test_fp64_non_finite_where_eager_is_finite_is_noise_not_a_failure():
    ref = torch.tensor([1.0, INF, NAN], dtype=torch.float64)
    assert compare(_x(1.0, 3.0e38, 5.0), _x(1.0, INF, 0.0), ref) is None
    # eager +inf where float64 says NaN: not determined either
    assert compare(_x(1.0, INF, 5.0), _x(1.0, NAN, 5.0), torch.tensor([1.0, NAN, 5.0], dtype=torch.float64)) is None


def test_compiled_non_finite_where_both_are_finite_fails():
    exp = _x(1.0, 2.0, 3.0)
    assert compare(exp, _x(1.0, NAN, 3.0), exp.double()).kind == "nan"
    diff = compare(exp, _x(1.0, 2.0, -INF), exp.double())
    assert diff.kind == "inf" and diff.details["index"] == [2]


def test_compiled_overflow_near_the_dtype_range_is_noise():
    big = torch.tensor([1.0, 1.0e38], dtype=torch.bfloat16)  # bfloat16 max is about 3.4e38
    assert compare(big, torch.tensor([1.0, INF], dtype=torch.bfloat16), big.double()) is None
    assert compare(big, torch.tensor([1.0, NAN], dtype=torch.bfloat16), big.double()) is None
    assert compare(big, torch.tensor([INF, 1.0e38], dtype=torch.bfloat16), big.double()).kind == "inf"


def test_overflow_range_follows_the_precision_floor():
    """A float32 value computed through float16 may overflow near float16's range."""
    exp = _x(1.0, 2.0e4)
    act = _x(1.0, INF)
    assert compare(exp, act, exp.double()).kind == "inf"
    assert compare(exp, act, exp.double(), floor=torch.float16) is None


def test_closeness_is_over_the_finite_positions_only():
    exp = torch.tensor([[1.0, NAN], [-INF, 4.0]])
    ref = exp.double()
    assert compare(exp, exp + 1e-6, ref) is None
    act = exp.clone()
    act[1, 1] += 1e-2
    diff = compare(exp, act, ref)
    assert diff.kind == "mismatch" and diff.details["index"] == [1, 1]
    assert diff.details["expected"] == 4.0


def test_nothing_left_to_compare_passes():
    exp = _x(NAN, NAN)
    assert compare(exp, _x(NAN, NAN), exp.double()) is None
    assert compare(exp, _x(5.0, -1.0), torch.tensor([1.0, 2.0], dtype=torch.float64)) is None
    assert compare(_x(), _x(), _x().double()) is None


@pytest.mark.parametrize(
    "exp, act",
    [
        (_x(1.0, INF), _x(1.0, 5.0)),  # eager non-finite, compiled differs
        (_x(1.0, NAN), _x(1.0, 0.0)),
        (_x(1.0, 2.0), _x(1.0, NAN)),  # compiled non-finite where eager is finite
        (_x(-0.0, 2.0), _x(0.0, 2.0)),  # a signed zero
    ],
)
def test_without_a_float64_reference_edge_values_are_inconclusive(exp, act):
    for ref in (None, _x(1.0, 2.0, 3.0).double()):  # none, or of another shape
        diff = compare(exp, act, ref)
        assert diff is not None and diff.kind == "non_finite_reference" and diff.inconclusive, (ref, diff)


def test_without_a_float64_reference_the_finite_positions_still_fail():
    assert compare(_x(1.0, NAN), _x(1.0, NAN), None) is None
    assert compare(_x(1.0, NAN, -0.0), _x(1.0 + 1e-6, NAN, -0.0), None) is None
    diff = compare(_x(1.0, NAN), _x(2.0, 0.0), None)
    assert diff.kind == "mismatch" and diff.details["index"] == [0]


def test_complex_values_are_judged_per_real_and_imaginary_part():
    exp = torch.tensor([1 + 1j, complex(0.0, NAN)], dtype=torch.complex64)
    ref = exp.to(torch.complex128)
    assert compare(exp, exp.clone(), ref) is None
    diff = compare(exp, torch.tensor([1 + 1j, 0j], dtype=torch.complex64), ref)
    assert diff.kind == "nan" and diff.details["index"] == [1, 1]


def test_bitwise_equal_tells_signed_zeros_apart_and_nan_equal():
    from oracles.compare import bitwise_equal

    assert not bitwise_equal(_x(0.0), _x(-0.0))
    assert bitwise_equal(_x(-0.0, NAN, 1.0), _x(-0.0, NAN, 1.0))
    assert not bitwise_equal(_x(NAN), _x(1.0))
    assert not bitwise_equal(torch.tensor([-0.0], dtype=torch.bfloat16), torch.tensor([0.0], dtype=torch.bfloat16))
    assert bitwise_equal(torch.tensor([1, 2]), torch.tensor([1, 2]))
    assert not bitwise_equal(torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert not bitwise_equal(torch.tensor([complex(-0.0, 1.0)]), torch.tensor([complex(0.0, 1.0)]))


def test_exact_mode_settles_edge_values_bitwise():
    """compare_runs(exact=...) (a rewrite without a float64 run): bitwise
    agreement passes what the tolerance alone leaves inconclusive, a flipped
    zero sign fails."""
    same = differential.compare_runs("t", _run(_x(1.0, NAN)), _run(_x(1.0, NAN)), None, exact=("output",))
    assert [v.status for v in same] == [Status.PASS]
    flipped = differential.compare_runs("t", _run(_x(-0.0, 1.0)), _run(_x(0.0, 1.0)), None, exact=("output",))
    assert flipped[0].failed and flipped[0].kind == "mismatch"
    loose = differential.compare_runs("t", _run(_x(-0.0, 1.0)), _run(_x(0.0, 1.0)), None)
    assert loose[0].status is Status.INCONCLUSIVE


def test_nondeterminism_gate_sees_a_flipped_zero_sign():
    v = differential.check(_outcome(_run(_x(-0.0)), _run(_x(0.0)), _run(_x(-0.0))))
    assert v.status is Status.INCONCLUSIVE and v.kind == "nondeterministic"


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


# The forward writes its second input in place after each call (Section.write); nothing requires grad (with a
# gradient, aot_eager meets KI-072 on it).
WRITING_PROGRAM = Program(
    inputs=(("x", TensorSpec((3, 4), "float32", False)), ("y0", TensorSpec((3, 4), "float32", False))),
    block=Block("function", ("x", "y0"), (), (), (), (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "add", (Ref("v0"), Ref("y0")))),
                "v1"),
    sections=(Section("calls", "chain", (Call(), Call()), write=("y0", "direct")),),
)


def test_a_write_hidden_from_autograd_is_caught():
    """The planted backend computes every value right and hides the forward's write to y0 from autograd (its
    version counter): only the version check sees it; an honest backend passes the same program."""
    bad = run_program(WRITING_PROGRAM, RunConfig(backend="suites.planted:hides_input_writes", dedup=False))
    assert bad.eager.written == ["input:y0"] and bad.compiled.written == [], bad.compiled.failure
    verdict = differential.check(bad)
    assert verdict.failed and verdict.kind == "version" and verdict.where == "state[input:y0]", verdict
    good = run_program(WRITING_PROGRAM, RunConfig(backend="aot_eager"))
    assert good.compiled.written == ["input:y0"] and differential.check(good).status is Status.PASS


# -0.0 where x > 0 (sin(x) * -0.0), NaN elsewhere (x * nan): edge values the
# computation determines, as float64 agrees.
EDGE_PROGRAM = Program(
    inputs=(("x", TensorSpec((3, 4), "float32", False)),),
    block=Block("function", ("x",), (), (), (), (
        Stmt("v0", "sin", (Ref("x"),)),
        Stmt("v1", "mul_scalar", (Ref("v0"), Const(-0.0))),
        Stmt("v2", "mul_scalar", (Ref("x"), Const(float("nan")))),
        Stmt("v3", "where", (Ref("v1"), Ref("x"), Ref("v2"))),
    ), "v3"),
    sections=(Section("calls", "fanout", (Call(), Call())),),
    outputs="tuple",
)


@pytest.mark.parametrize(
    "backend, kind",
    [("suites.planted:zero_sign_lost", "signed_zero"), ("suites.planted:nan_zeroed", "nan")],
)
def test_planted_edge_value_faults_are_caught(backend, kind):
    outcome = run_program(EDGE_PROGRAM, RunConfig(backend=backend, dedup=False))
    out = outcome.eager.outputs[-1]
    assert torch.signbit(out[out == 0]).any() and out.isnan().any()  # the program has both edge values
    verdict = differential.check(outcome)
    assert verdict.failed and verdict.kind == kind, verdict


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_honest_backends_pass_the_edge_value_program(backend):
    verdict = differential.check(run_program(EDGE_PROGRAM, RunConfig(backend=backend)))
    assert verdict.status is Status.PASS, verdict


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


@pytest.mark.unit
def test_zero_signs_of_summing_programs_are_left_unjudged():
    """A sum of -0.0s is +0.0 in eager and -0.0 in inductor: IEEE leaves the
    start of a sum open, so a program with a summing op has no say over the
    sign of its zeros, while the same flip in a program without one fails."""
    from generators.check import zero_signs_determined

    def program(op: str, *extra) -> Program:
        body = (Stmt("v0", op, (Ref("x"), *extra)),)
        return Program((("x", TensorSpec((2, 3))),), Block("function", ("x",), (), (), (), body, "v0"),
                       (Section("calls", "chain", (Call(), Call())),))

    assert zero_signs_determined(program("neg"))
    assert not zero_signs_determined(program("sum", Const(-1), Const(True)))
    minus = torch.tensor([-0.0, 1.0])
    plus = torch.tensor([0.0, 1.0])
    assert compare(minus, plus, minus.double()).kind == "signed_zero"
    assert compare(minus, plus, minus.double(), signed_zeros=False) is None


def test_a_gradient_where_eager_has_none_is_zero_grad_when_all_zeros_else_unexpected():
    """Autograd materializing zeros (AOTAutograd's unused outputs, KI-135) is a class of its own, so a known
    issue of that class claims no gradient with values in it."""
    eager = Execution(outputs=[torch.ones(2)], grads={"w": None})
    for actual, kind in ((torch.zeros(3), "zero_grad"), (torch.tensor([0.0, 1.0, 0.0]), "unexpected_grad")):
        compiled = Execution(outputs=[torch.ones(2)], grads={"w": actual})
        bad = [v for v in differential.compare_runs("differential", eager, compiled, None) if v.failed]
        assert [(v.kind, v.where) for v in bad] == [(kind, "grad[w]")], bad
