"""Self-tests of the program IR, the well-formedness check and codegen."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings

from generators.check import check
from generators.codegen import render
from generators.ir import Arg, Block, Const, MalformedProgram, Program, Ref, Repeat, Stmt, TensorSpec
from generators.strategies import programs
from harness.loader import load_source
from harness.pipeline import instantiate

pytestmark = pytest.mark.unit


def _program(rows=((0.5,), (2.0,)), structure="for_values", kind="function", body=None) -> Program:
    body = body or (Stmt("v0", "mul_scalar", (Ref("x"), Arg("s0"))), Stmt("v1", "sin", (Ref("v0"),)))
    return Program(
        inputs=(("x", TensorSpec((3, 4), "float32", True)),),
        block=Block(kind, ("x",), (), ("s0",) if rows and rows[0] else (), body, body[-1].out),
        repeat=Repeat(structure, "chain", rows),
    )


@settings(max_examples=200)
@given(programs())
def test_json_round_trip_is_identity(program):
    assert Program.from_json(program.to_json()) == program
    assert Program.from_json(Program.from_json(program.to_json()).to_json()).to_json() == program.to_json()


@settings(max_examples=200)
@given(programs())
def test_drawn_programs_are_well_formed_and_render_deterministically(program):
    check(program)
    assert render(program) == render(program)
    compile(render(program), "<generated>", "exec")


@settings(max_examples=60)
@given(programs())
def test_drawn_programs_run_in_eager(program):
    module = load_source(render(program))
    model, inputs = instantiate(module, program)
    out = model(*inputs)
    assert out is not None


def test_ground_truth_distinguishes_value_and_type():
    assert _program(rows=((0.5,), (2.0,), (0.5,))).identical_repeats() == [[0, 2], [1]]
    assert _program(rows=((2.0,), (2.0,))).identical_repeats() == [[0, 1]]
    mixed = _program(rows=((2,), (2.0,)), body=(Stmt("v0", "add_scalar", (Ref("x"), Arg("s0"))), Stmt("v1", "sin", (Ref("v0"),))))
    assert mixed.identical_repeats() == [[0], [1]]
    assert mixed.differing_args() == ["s0"]


def test_render_uses_real_loops_and_one_line_per_call():
    loop = render(_program())
    assert "for s0 in [0.5, 2.0]:" in loop and loop.count("block(h, s0)") == 1
    calls = render(_program(structure="calls"))
    assert "h = block(h, 0.5)" in calls and "h = block(h, 2.0)" in calls
    modules = render(_program(kind="module", structure="module_list"))
    assert "nn.ModuleList([Block(0.5), Block(2.0)])" in modules and "self.s0" in modules


def test_loaded_program_comes_from_a_real_file():
    module = load_source(render(_program()))
    code = module.block.__code__
    assert code.co_filename.endswith(".py")
    with open(code.co_filename) as f:
        assert "def block(x, s0):" in f.read()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["block"]["body"][0].update(op="no_such_op"), "unknown op"),
        (lambda d: d["repeat"].update(structure="while_true"), "unknown repetition structure"),
        (lambda d: d["repeat"]["args"].append([]), "every repeat must give a value"),
        (lambda d: d["block"]["body"][0]["operands"][1].update(arg="s9"), "not a block argument"),
        (lambda d: d["block"].update(result="v7"), "undefined"),
        (lambda d: d.pop("block"), "not a program"),
        (lambda d: d["block"]["body"][0]["operands"].__setitem__(0, {"what": 1}), "unknown operand"),
    ],
)
def test_malformed_programs_get_a_clear_error(mutate, message):
    d = json.loads(_program().to_json())
    mutate(d)
    with pytest.raises(MalformedProgram, match=message):
        check(Program.from_json(json.dumps(d)))


def test_chained_block_must_keep_its_shape():
    body = (Stmt("v0", "sum", (Ref("x"), Const(-1))),)
    with pytest.raises(MalformedProgram, match="keep its input's shape"):
        check(_program(rows=((), ()), structure="for_range", body=body))
