"""Localization names the first layer of the backend ladder that fails."""

from __future__ import annotations

import pytest

from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles.registry import judge
from reports.known_issues import load
from campaigns.localize import LADDER, localize
from reports.triage import triage

pytestmark = pytest.mark.unit


def _finding(issue_id: str, backend: str, oracle: str = "differential"):
    issue = next(i for i in load() if i.id == issue_id)
    outcome = run_program(issue.program(), RunConfig(backend=backend))
    verdict = next(v for v in judge(outcome) if v.failed and v.oracle == oracle)
    return triage(outcome, verdict)


def test_a_wrong_dynamo_graph_is_localized_to_the_first_rung():
    """KI-001 merges regions in the Dynamo graph: the region identity oracle
    sees it with the eager backend already, and not without deduplication."""
    where = localize(_finding("KI-001", "aot_eager", "region_identity"))
    assert where.layer == "eager" and not where.without_dedup, where
    assert "Dynamo graph" in where.summary()


def test_a_layer_above_dynamo_is_named_when_eager_is_right():
    """KI-011: the rewritten Dynamo graph is right (eager backend passes);
    AOTAutograd's one trace of the shared subgraph is where it goes wrong."""
    where = localize(_finding("KI-011", "aot_eager"))
    assert where.ladder == {"eager": False, "aot_eager": True}, where
    assert where.layer == "aot_eager" and "AOTAutograd" in where.summary()


def test_a_backend_of_its_own_is_not_pinned_on_the_ladder():
    from suites.test_differential_oracle import PLANTED_PROGRAM

    outcome = run_program(PLANTED_PROGRAM, RunConfig(backend="suites.planted:perturb_one_element", dedup=False))
    verdict = next(v for v in judge(outcome, ("differential",)) if v.failed)
    where = localize(triage(outcome, verdict))
    assert where.layer == "" and set(where.ladder) == {b for b, _ in LADDER}
    assert "user backend" in where.summary()
