"""Hypothesis finds planted deduplication-shaped bugs and shrinks them to
hand-sized repros: the generator's shrinking is part of the product."""

from __future__ import annotations

import pytest
from hypothesis import Phase, find, settings

from generators.codegen import render
from generators.strategies import programs
from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import differential
from reports.minimize import minimize

pytestmark = pytest.mark.property

PLANTED = "suites.planted:corrupt_every_third_invoke_subgraph"


def _fails(program, backend: str, dedup: bool = True) -> bool:
    return differential.check(run_program(program, RunConfig(backend=backend, dedup=dedup, backward=False))).failed


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


PLANTED_NESTED = "suites.planted_nested:corrupt_second_inner_call"


def _nested_regions(program) -> bool:
    """A decorated block that calls decorated blocks at least twice."""
    return any(b.compile_region and sum(program.sub(n).compile_region for n, _ in b.children()) >= 2
               for b in program.blocks())


@pytest.mark.long(seconds=88)
def test_planted_nested_region_fault_is_found_and_shrunk():
    # Deduplication off: nested regions with it on mostly crash the pass
    # (KI-003), and the fault sits in Dynamo's own nested subgraphs anyway.
    def caught(program) -> bool:
        return _fails(program, PLANTED_NESTED, dedup=False) and not _fails(program, "eager", dedup=False)

    found = find(
        programs(max_stmts=3, max_sections=1, breaks=False),
        caught,
        settings=settings(max_examples=1000, database=None, derandomize=True, deadline=None,
                          phases=[Phase.generate, Phase.shrink]),
    )
    assert caught(found) and _nested_regions(found)
    # Hypothesis shrinks the hierarchy (two blocks, two levels); what its
    # shrink phase leaves of the bodies within its budget, the IR reducer
    # (what a campaign runs on each finding) cuts.
    hypothesis_shape = (len(found.blocks()), found.depth(), [len(b.body) for b in found.blocks()])
    small = minimize(found, caught).program
    blocks, depth, stmts = len(small.blocks()), small.depth(), [len(b.body) for b in small.blocks()]
    report = f"Hypothesis: {hypothesis_shape}\n{render(found)}\nreduced: {(blocks, depth, stmts)}\n{render(small)}"
    assert blocks <= 2 and depth <= 2 and max(stmts) <= 3, report
    assert caught(small) and _nested_regions(small), report
    print(report)
