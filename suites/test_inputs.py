"""What a region is given (generators.inputs): every way extra tensors travel
computes what passing them one by one computes, every variant of what a
block takes renders and runs in eager, the variants Python computes alike
(``Take.same``) give equal values and one ground-truth key, the others
another key, and the reducer, the mutation operator and triage's equalizer
each take the feature away."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from generators.check import check
from generators.codegen import render
from generators.inputs import PACKS, TAKES
from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec, plain_inputs, taking
from generators.mutate import mutate
from generators.variation import equalize
from harness.loader import load_source
from harness.outcome import RunConfig
from harness.pipeline import run_eager

pytestmark = pytest.mark.unit

X = ("x", TensorSpec((3, 4), "float32", True))
Y = ("y0", TensorSpec((3, 4), "float32", False))
Z = ("y1", TensorSpec((4,), "float32", False))


def _program(extras: str = "positional", takes: str = "", givens: tuple[str, ...] = ("",) * 3,
             structure: str = "calls", compile_region: bool = False) -> Program:
    body = (Stmt("v0", "add", (Ref("x"), Ref("y0"))), Stmt("v1", "mul", (Ref("v0"), Ref("y1"))),
            Stmt("v2", "tanh", (Ref("v1"),)))
    block = Block("function", ("x", "y0", "y1"), (), (), (), body, "v2", extras=extras, takes=takes,
                  compile_region=compile_region)
    calls = tuple(Call(given=g) for g in givens)
    return Program(inputs=(X, Y, Z), block=block, sections=(Section(structure, "chain", calls),))


def _outputs(program: Program) -> list:
    return run_eager(load_source(render(program)), program, RunConfig()).outputs


@pytest.mark.parametrize("extras", [e for e in PACKS if e != "positional"])
def test_every_way_extra_tensors_travel_computes_what_passing_them_one_by_one_does(extras):
    packed = _program(extras)
    check(packed)
    torch.testing.assert_close(_outputs(packed), _outputs(_program()))
    assert plain_inputs(packed) == _program()


@pytest.mark.parametrize("take", sorted(TAKES))
def test_every_variant_of_what_a_block_takes_renders_runs_and_keys_by_pythons_rule(take):
    t = TAKES[take]
    variants = [v for v, _ in t.variants]
    for structure in ("calls", "for_range"):
        givens = tuple(variants[i % len(variants)] for i in range(max(3, len(variants))))
        program = _program(takes=take, givens=givens, structure=structure)
        check(program)
        assert f"given: {variants[0]}" not in render(program)
        _outputs(program)
        keys = program.repeat_keys()
        for i, a in enumerate(givens):
            for j, b in enumerate(givens):
                if not t.carried:
                    assert (keys[i] == keys[j]) == (t.computes(a) == t.computes(b)), (a, b)
    for group in t.same:  # the variants Python computes alike give equal values
        runs = [_outputs(_program(takes=take, givens=(v,) * 3)) for v in group]
        for other in runs[1:]:
            torch.testing.assert_close(other, runs[0])


def test_a_value_read_from_the_carried_tensor_keys_each_chained_repeat_apart():
    program = _program(takes="requires_grad", givens=("requires_grad",) * 3)
    assert len(set(program.repeat_keys())) == 3  # the first call's input may not require grad, the next do


def test_the_reducer_the_mutation_and_the_equalizer_take_the_feature_away():
    from generators.reduce import proposals

    program = _program("namedtuple", "module", ("shared", "class", "own_forward"))
    cuts: dict[str, list] = {}
    for name, p in proposals(program):
        cuts.setdefault(name, []).append(p)
    assert any(p.block.takes == "" and all(c.given == "" for _, c in p.repeats()) for p in cuts["takes"])
    assert any(p.block.extras == "positional" for p in cuts["extras"])
    assert {c.given for _, c in cuts["given"][0].repeats()} == {"shared"}
    assert any([c.given for _, c in p.repeats()] == ["shared", "shared", "own_forward"] for p in cuts["given"])
    assert {c.given for _, c in equalize(program, ["given:module"]).repeats()} == {"shared"}
    rng = random.Random(0)
    mutants = [mutate(program, "give", rng) for _ in range(30)]
    assert any(m is not None and m.block.takes != "module" for m in mutants)
    assert any(m is not None and m.block.takes == "module" and
               [c.given for _, c in m.repeats()] != ["shared", "class", "own_forward"] for m in mutants)
    assert taking(program, "", "").block.takes == ""


def test_tensors_by_keyword_need_no_python_argument_after_them():
    from generators.ir import Arg, MalformedProgram

    program = _program("keyword")
    body = (*program.block.body, Stmt("v3", "mul_scalar", (Ref("v2"), Arg("s0"))))
    with pytest.raises(MalformedProgram, match="keyword"):
        check(replace(program, block=replace(program.block, args=("s0",), body=body, result="v3"),
                      sections=(Section("calls", "chain", (Call((2.0,)),)),)))
