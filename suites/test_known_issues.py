"""Regression tests for recorded torch bugs, in the manner of xfail(strict=True).

Each known issue's minimal program must still fail with a signature the issue
claims. When torch fixes the bug the test fails with "appears fixed", telling
whoever upgraded torch to retire the entry from the baseline.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.pipeline import run_program
from oracles.registry import judge, run_config
from reports.known_issues import load
from reports.triage import triage

pytestmark = pytest.mark.known_issue
ISSUES = load()


def test_baseline_is_not_empty_and_well_formed():
    assert ISSUES, "no known issues loaded"
    for issue in ISSUES:
        assert issue.patterns and issue.title and (issue.folder / "repro.py").exists()


@pytest.mark.parametrize("issue", ISSUES, ids=[i.id for i in ISSUES])
def test_known_issue_still_reproduces_with_its_signature(issue):
    # an issue found through one change re-makes every change the program offers
    outcome = run_program(issue.program(), run_config(issue.backend, variants=-1 if issue.variant else None))
    failures = [v for v in judge(outcome) if v.failed]
    if not failures:
        pytest.fail(f"{issue.id} appears fixed in this torch: its program now passes. "
                    f"Retire it from reports/known_issues/ ({issue.title})")
    signatures = [triage(outcome, v).signature for v in failures]
    assert any(issue.matches(s) for s in signatures), (
        f"{issue.id} fails, but with another signature: {signatures}")


@pytest.mark.parametrize("issue", ISSUES, ids=[i.id for i in ISSUES])
def test_standalone_repro_exits_1_while_the_bug_is_there(issue):
    done = subprocess.run([sys.executable, str(issue.folder / "repro.py")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, f"repro exit {done.returncode}:\n{done.stdout}\n{done.stderr[-2000:]}"
    assert "REPRODUCED" in done.stdout


@pytest.mark.parametrize("issue", ISSUES, ids=[i.id for i in ISSUES])
def test_committed_repro_is_the_rendered_one(issue):
    assert (issue.folder / "repro.py").read_text() == issue.render(), "repro.py is stale: re-render it from program.json"
