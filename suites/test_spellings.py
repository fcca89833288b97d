"""Op spellings (generators.spellings): every listed form exists in the
installed torch and computes bit for bit what the op's default computes;
the IR, check, reducer and triage carry them; and a backend that breaks one
form only is caught on a program written in that form, and only there."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch

from generators.check import check, checked
from generators.codegen import render
from generators.features import features, universe
from generators.ir import Arg, Block, Call, Const, MalformedProgram, Program, Ref, Section, Stmt, TensorSpec
from generators.mutate import mutate
from generators.ops import OPS
from generators.reduce import labeled_candidates
from generators.spellings import KEEPS, KINDS, SPELLINGS, drawn_kinds, kinds_of
from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import differential
from reports.triage import spellings, triage

from . import planted_spellings
from .spelled import cases, evaluate, operands, same_bits

pytestmark = pytest.mark.unit


# --- the catalogue against the installed torch ---------------------------------------


def _dtypes(op) -> list[str]:
    return [d for d in ("float32", "float64", "bfloat16") if d in op.dtypes] or [op.dtypes[0]]


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_every_spelling_computes_the_default_bit_for_bit(name):
    """Forward on every value of each Python slot, and backward where the op
    is differentiable (``out=`` has none), in float32, float64 and bfloat16;
    a case the default itself fails in eager, or where an in-place or out=
    form would write another type than the primary's, is not drawn (check)."""
    op, compared = OPS[name], 0
    for dtype in _dtypes(op):
        for case in cases(op, dtype):
            tensors = operands(case)
            try:
                expected, written = evaluate(case, "", tensors)
            except RuntimeError:
                continue
            for form in SPELLINGS[name].forms:
                if form.kind in KEEPS and (expected.dtype, expected.shape) != (tensors[0].dtype, tensors[0].shape):
                    continue
                got, got_written = evaluate(case, form.kind, tensors)
                where = f"{name} spelled {form.kind} ({form.fmt}) on {case}"
                assert same_bits(expected, got), where
                assert all(same_bits(a, b) for a, b in zip(written, got_written)), f"{where}: its writes"
                compared += 1
                if op.differentiable and form.kind != "out" and dtype != "bfloat16" and expected.is_floating_point():
                    leaves = operands(case, grad=True)
                    e, _ = evaluate(case, "", leaves)
                    g, _ = evaluate(case, form.kind, leaves)
                    seed = torch.randn(e.shape, generator=torch.Generator().manual_seed(1), dtype=e.dtype)
                    want = torch.autograd.grad(e, [t for t in leaves if t.requires_grad], seed, allow_unused=True)
                    have = torch.autograd.grad(g, [t for t in leaves if t.requires_grad], seed, allow_unused=True)
                    assert all(same_bits(a, b) if a is not None else b is None for a, b in zip(want, have)), \
                        f"{where}: gradients"
    assert compared, f"no case of {name} compared"


def test_catalogue_is_well_formed():
    for name, entry in SPELLINGS.items():
        op = OPS[name]
        assert entry.default in KINDS and entry.default not in kinds_of(name), name
        assert len(set(kinds_of(name))) == len(entry.forms), f"{name}: one form per kind"
        for form in entry.forms:
            if form.kind == "module":
                assert "{0}" not in form.fmt and form.fmt.startswith("nn."), f"{name}: a module is built, then applied"
            if form.kind in KEEPS:
                assert not op.autocast, f"{name}: autocast changes the result's type, which {form.kind} cannot hold"
    assert drawn_kinds() == KINDS, "every kind spells some op"


# Spellings torch has (a method, an aten op, a function or an in-place method
# of the default's name) that the catalogue leaves out, and why.
NOT_SPELLED = {
    "conv1d": {"torch": "F.conv1d is torch.conv1d: the same node"},
    "conv2d": {"torch": "F.conv2d is torch.conv2d: the same node"},
    "rms_norm": {"torch": "Dynamo inlines F.rms_norm into a torch.rms_norm node"},
    "logical_not": {"inplace": "in place on the comparison's bool result, not a tensor of the primary's type"},
    "transpose": {"inplace": "transpose_ restrides: the result's shape is not the primary's"},
    "unsqueeze": {"inplace": "unsqueeze_ changes the shape"},
    "squeeze": {"inplace": "squeeze_ changes the shape"},
    "mul_": {"aten": "aten.mul_.Scalar rounds a bfloat16 product of a subnormal scalar otherwise than mul_"},
    "elu": {"inplace": "elu_ takes gradients from the result: rounded otherwise"},
}
UNSPELLED_OPS = {
    "batch_norm": "updates running statistics: torch.batch_norm takes nine positional arguments",
    "dropout": "random: another spelling draws other numbers",
    "softmax_upcast": "a composite of casts", "zeros_like": "a composite of a factory and arithmetic",
    "to_float": "its default is the method; no function or aten op of that name",
}


def test_catalogue_lists_what_torch_offers():
    """Derived from torch itself: for an op written ``torch.f(x...)``,
    ``F.f(x...)`` or ``x.f(...)``, every one of ``torch.f``, ``Tensor.f``,
    ``aten.f`` and ``Tensor.f_`` that exists is spelled, or is left out for a
    stated reason."""
    missing = []
    for name, op in OPS.items():
        m = re.match(r"^(torch|F)\.(\w+)\(\{0\}", op.fmt) or re.match(r"^\{0\}\.(\w+)\(", op.fmt)
        if not m or name in UNSPELLED_OPS:
            continue
        fn = m.group(m.lastindex)
        offered = {kind for kind, there in (("method", hasattr(torch.Tensor, fn)), ("aten", hasattr(torch.ops.aten, fn)),
                                            ("torch", hasattr(torch, fn)), ("inplace", hasattr(torch.Tensor, fn + "_")))
                   if there}
        default = {"torch": "torch", "F": "functional"}.get(m.group(1), "method") if m.lastindex == 2 else "method"
        listed = {default, *kinds_of(name)} | set(NOT_SPELLED.get(name, {}))
        missing += [f"{name}: {kind}" for kind in sorted(offered - listed)]
    assert not missing, missing


# --- programs written in a spelling ----------------------------------------------------

X = ("x", TensorSpec((3, 4)))


def _program(op: str, spelling: str = "", operands=(), grad: bool = False, calls: int = 2) -> Program:
    block = Block("function", ("x",), (), (), (), (Stmt("v0", op, (Ref("x"), *operands), spelling),), "v0")
    return Program(inputs=(("x", TensorSpec((3, 4), requires_grad=grad)),), block=block,
                   sections=(Section("calls", "chain", (Call(),) * calls),))


def test_spelling_round_trips_and_the_default_is_not_written():
    p = _program("gelu", "module", (Const("tanh"),))
    assert Program.from_json(p.to_json()) == p and p.to_json().count('"spelling"') == 1
    plain = _program("gelu", "", (Const("tanh"),))
    assert '"spelling"' not in plain.to_json()  # an old program.json reads and renders as it did


def test_module_spelling_is_a_global_built_once_from_literals():
    source = render(_program("gelu", "module", (Const("tanh"),)))
    assert "MOD_V0 = nn.GELU(approximate='tanh')" in source and "v0 = MOD_V0(x)" in source
    per_call = _program("gelu", "module", (Arg("s0"),))
    per_call = replace(per_call, block=replace(per_call.block, args=("s0",)),
                       sections=(Section("calls", "chain", (Call(("tanh",)), Call(("none",)))),))
    with pytest.raises(MalformedProgram, match="literals"):
        check(per_call)


def test_check_knows_what_each_spelling_needs():
    assert checked(_program("sin", "out"))
    with pytest.raises(MalformedProgram, match="out="):
        check(_program("sin", "out", grad=True))
    with pytest.raises(MalformedProgram, match="no spelling"):
        check(_program("sin", "module"))
    # x (float32) + y (float64) promotes: an in-place add on x's clone would round to float32
    promoted = _program("add", "inplace", (Ref("y0"),))
    promoted = replace(promoted, inputs=(X, ("y0", TensorSpec((3, 4), "float64"))),
                       block=replace(promoted.block, inputs=("x", "y0")), sections=(Section("calls", "fanout", (Call(),)),),
                       outputs="tuple")
    with pytest.raises(MalformedProgram, match="primary's type"):
        check(promoted)
    assert checked(replace(promoted, block=replace(promoted.block, body=(replace(promoted.block.body[0], spelling="aten"),))))


def test_reducer_keeps_a_spelling_only_where_the_failure_needs_it():
    from campaigns.minimize import minimize

    p = _program("relu", "method")
    assert ("spelling", _program("relu")) in [(label, q) for label, q in labeled_candidates(p)]
    block = Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),), "aten"),
                                                    Stmt("v1", "relu", (Ref("v0"),), "method"),
                                                    Stmt("v2", "add", (Ref("v1"), Ref("x")), "out")), "v2")
    three = replace(p, block=block)

    def needs_relu_method(q: Program) -> bool:
        return any(s.op == "relu" and s.spelling == "method" for s in q.block.body)

    small = minimize(three, needs_relu_method).program
    assert spellings(small) == ["relu:method"], small.block.body


def test_respell_and_features_and_triage_names():
    import random

    p = _program("relu")
    respelled = {mutate(p, "respell", random.Random(seed)).block.body[0].spelling for seed in range(30)}
    assert respelled == set(kinds_of("relu"))
    assert "spelling:method" in features(_program("relu", "method")) and "spelling:method" in universe()
    assert spellings(_program("relu", "method")) == ["relu:method"]


# --- planted faults: each breaks one form only -----------------------------------------

# The program each fault's form is written in: (op, Python operands).
OPERANDS = {"pow_scalar": (Const(2),)}


@pytest.mark.parametrize("name", sorted(planted_spellings.FAULTS))
def test_planted_fault_breaks_its_form_only(name):
    fault = planted_spellings.FAULTS[name]
    backend = f"suites.planted_spellings:{name}"
    config = RunConfig(backend=backend, dedup=False, backward=False)
    spelled = _program(fault.op, fault.kind, OPERANDS.get(fault.op, ()), calls=1)
    verdict = differential.check(run_program(spelled, config))
    assert verdict.failed and verdict.kind == "mismatch", verdict
    plain = replace(spelled, block=replace(spelled.block, body=(replace(spelled.block.body[0], spelling=""),)))
    assert not differential.check(run_program(plain, config)).failed


def test_triage_names_the_spelling_a_wrong_value_needs():
    """Two spellings, one broken: the signature names the one the failure needs."""
    block = Block("function", ("x",), (), (), (), (Stmt("v0", "sin", (Ref("x"),), "aten"),
                                                    Stmt("v1", "relu", (Ref("v0"),), "method")), "v1")
    program = Program(inputs=(X,), block=block, sections=(Section("calls", "chain", (Call(),)),))
    config = RunConfig(backend="suites.planted_spellings:method_relu", dedup=False, backward=False)
    outcome = run_program(program, config)
    finding = triage(outcome, differential.check(outcome))
    assert finding.signature.endswith(":spelled=method"), finding.signature


def test_stats_check_fails_while_a_kind_is_never_drawn():
    from campaigns.stats import report

    _, summary = report([_program("sin", "method").to_json()], None)
    assert "spelling:method" not in summary["missing"] and "spelling:out" in summary["missing"]
    assert summary["spellings_drawn"] == {"sin:method": 1}


def test_an_out_spelling_under_fullgraph_writes_into_a_contiguous_tensor():
    """``out=torch.empty_like(x)`` of a transposed x is not contiguous, where Dynamo graph-breaks ("Attempted to
    call op with non-contiguous `out=` tensor"), which fullgraph makes an error by design: a 10-minute campaign
    called it a crash of torch. Under fullgraph the out= tensor is contiguous; without it, like the primary."""
    from pathlib import Path

    from harness.pipeline import run_program
    from oracles import differential
    from oracles.registry import run_config

    program = Program.from_json((Path(__file__).parent / "data" / "out_spelling_of_a_transposed_input.json").read_text())
    assert program.options.fullgraph and "memory_format=torch.contiguous_format" in render(program)
    loose = replace(program, options=replace(program.options, fullgraph=False))
    assert "out=torch.empty_like(" in render(loose) and "contiguous_format" not in render(loose)
    verdict = differential.check(run_program(program, run_config("aot_eager", ("differential",))))
    assert not verdict.failed, verdict
