"""Hypothesis finds a planted deduplication-shaped bug and shrinks it to a
hand-sized repro: the generator's shrinking is part of the product."""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, settings

from generators.codegen import render
from generators.strategies import programs
from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import differential

pytestmark = pytest.mark.property

PLANTED = "suites.planted:corrupt_every_third_invoke_subgraph"


def _fails(program, backend: str) -> bool:
    return differential.check(run_program(program, RunConfig(backend=backend, backward=False))).failed


def test_planted_invoke_subgraph_fault_is_found_and_shrunk():
    def caught(program) -> bool:
        # Only the planted fault counts: a program the honest backend also
        # fails on (a real torch bug) is not what this test is looking for.
        return _fails(program, PLANTED) and not _fails(program, "eager")

    # Small programs without graph breaks: the planted fault needs only three
    # calls of one block; each shrink step runs two compiles, so a larger
    # start made the shrink alone take 15+ minutes in CI.
    found = find(
        programs(max_stmts=3, max_sections=1, breaks=False),
        caught,
        settings=settings(max_examples=300, database=None, derandomize=True, deadline=None,
                          phases=[Phase.generate, Phase.shrink]),
    )
    repeats = len(found.repeats())
    ops = len(found.block.body)
    assert repeats <= 3 and ops <= 3, f"shrunk to {repeats} repeats and {ops} ops:\n{render(found)}"
    # Still a real finding after shrinking, and a readable one.
    assert caught(found)
    print(render(found))
