"""The pipeline isolates programs from each other."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from generators.ir import Block, Call, Context, Program, Ref, Section, Stmt, TensorSpec
from harness.outcome import RunConfig
from harness.pipeline import isolated_global_state, run_program

pytestmark = pytest.mark.unit


def test_global_state_is_restored_after_a_crash_inside_a_program():
    with pytest.raises(RuntimeError), isolated_global_state():
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.set_autocast_enabled("cpu", True)
        raise RuntimeError("the compiler under test crashed mid-program")
    assert torch.get_default_dtype() is torch.float32
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


def test_an_autocast_bracket_a_crash_left_open_is_closed_and_its_cast_cache_cleared():
    """A compiled graph that raises between _enter_autocast and _exit_autocast leaves autocast's nesting count up;
    no later bracket's exit then clears autocast's cache, and a weight cast made below autograd (invoke_subgraph's
    forward runs its body so) served a later program's linear without grad (seed 99: read as the pass's fault)."""
    import torch.nn.functional as F

    w = torch.nn.Parameter(torch.randn(4, 4))
    with pytest.raises(RuntimeError), isolated_global_state():
        torch.set_autocast_dtype("cpu", torch.float16)
        torch.autocast_increment_nesting()  # what _enter_autocast does
        torch.set_autocast_enabled("cpu", True)
        with torch._C._AutoDispatchBelowAutograd():
            F.linear(torch.randn(4), w)  # a cast of w, cached with no gradient link
        raise RuntimeError("the compiled graph raised inside its autocast bracket")
    assert torch.get_autocast_dtype("cpu") is torch.bfloat16
    with torch.autocast("cpu", dtype=torch.float16):
        assert F.linear(torch.randn(4), w).requires_grad


def test_hygiene_oracle_catches_a_leaked_dispatch_mode_and_the_pipeline_cleans_it():
    from generators.ir import Block, Call, Program, Ref, Section, Stmt, TensorSpec
    from harness.hygiene import leaked_state
    from harness.outcome import RunConfig
    from harness.pipeline import run_program
    from oracles import hygiene

    body = (Stmt("v0", "sin", (Ref("x"),)),)
    program = Program(
        (("x", TensorSpec((3, 4), "float32", True)),),
        Block("function", ("x",), (), (), (), body, "v0"),
        (Section("calls", "chain", (Call(), Call())),),
    )
    leaky = run_program(program, RunConfig(backend="suites.planted:leak_dispatch_mode", dedup=False))
    verdict = hygiene.check(leaky)
    assert verdict.failed and verdict.kind == "leaked_state" and "_PassThrough" in verdict.message
    assert leaked_state() == []  # cleaned up for the next program
    clean = run_program(program, RunConfig(backend="aot_eager", dedup=False))
    assert not hygiene.check(clean).failed


def test_recorder_attributes_nodes_to_block_calls_and_records_their_state():
    """The structural oracles stand on this recording: which call of the block
    traced each node, the global state it was traced under, the graph before
    the pass, the regions as data, what became a subgraph call, and guards."""

    body = (Stmt("v0", "sin", (Ref("x"),)), Stmt("v1", "tanh", (Ref("v0"),)))
    program = Program(
        inputs=(("x", TensorSpec((3, 4)),),),
        block=Block("function", ("x",), (), (), (), body, "v1"),
        sections=(Section("calls", "fanout", (Call(context=Context(grad=False)), Call(context=Context(grad=True)),
                                               Call(context=Context(grad=True)))),),
        outputs="tuple",
    )
    capture = run_program(program, RunConfig()).capture
    (record,) = capture.structure
    calls = {n: r.instance for n, r in record.nodes.items() if r.instance is not None and n.startswith("v")}
    assert sorted(set(calls.values())) == [0, 1, 2]
    assert [r.ambient["grad"] for n, r in record.nodes.items() if n in calls] == [False, False, True, True, True, True]
    assert record.pre is not None and "torch.sin" in record.pre.code and "invoke_subgraph" not in record.pre.code
    assert record.post is not None and "invoke_subgraph" in record.post.code
    (group,) = record.groups  # the two calls with grad, not the one without
    assert [[d.name for d in region] for region in group] == [["v0_1", "v1_1"], ["v0_2", "v1_2"]]
    assert [r.invoke is not None for r in record.replacements] == [True, True]
    assert record.rewrite is not None and record.rewrite[2].failure is None
    assert any(g.startswith("TENSOR_MATCH") for g in capture.guards)


def test_a_compile_that_dies_inside_a_forward_leaves_no_default_dtype_to_the_next_run():
    """The program sets torch.set_default_dtype(torch.float64) around a call that
    Dynamo dies on (KI-003, with the pass on): the companion run without the pass,
    in the same process, built its parameters in float64 and failed 'mixed dtype
    (CPU): expect parameter to have scalar type of Float', an unconfirmed finding
    of a 10-minute campaign (seed 0) that was the harness's own."""
    import torch

    from generators.codegen import render
    from generators.ir import Program
    from harness.loader import load_source
    from harness.outcome import RunConfig
    from harness.pipeline import run_compiled

    program = Program.from_json((Path(__file__).parent / "data" / "default_dtype_left_by_a_crash.json").read_text())
    module = load_source(render(program))
    crashed, _ = run_compiled(module, program, RunConfig(backend="aot_eager", dedup=True))
    assert crashed.failure is not None and "example_value" in crashed.failure.message  # KI-003
    assert torch.get_default_dtype() == torch.float32
    after, _ = run_compiled(module, program, RunConfig(backend="aot_eager", dedup=False))
    assert after.failure is None, after.failure
