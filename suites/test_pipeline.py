"""The pipeline isolates programs from each other."""

from __future__ import annotations

import pytest
import torch

from harness.pipeline import isolated_global_state

pytestmark = pytest.mark.unit


def test_global_state_is_restored_after_a_crash_inside_a_program():
    with pytest.raises(RuntimeError), isolated_global_state():
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.set_autocast_enabled("cpu", True)
        raise RuntimeError("the compiler under test crashed mid-program")
    assert torch.get_default_dtype() is torch.float32
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


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
