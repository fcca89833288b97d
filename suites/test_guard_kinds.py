"""The guard kinds a campaign's programs made Dynamo build, of those its
GuardBuilder has (reports.guard_coverage): the kinds a real compile records
are named as the builder names them, and what workers report folds into the
figure the summary, the Markdown and HTML reports and a merge all show."""

from __future__ import annotations

from collections import Counter

import pytest

from harness.capabilities import guard_kinds, has
from harness.outcome import RunConfig
from harness.pipeline import run_program
from reports import guard_coverage
from reports.ledger import Ledger

from .test_guard_oracle import HOOKED

pytestmark = pytest.mark.unit


@pytest.mark.skipif(not has("guard_filter_fn"), reason="this torch records no guards (no guard_filter_fn)")
def test_a_compile_records_its_guards_by_the_kinds_the_guard_builder_has():
    outcome = run_program(HOOKED, RunConfig(backend="eager", variants=0))
    built = guard_coverage.kinds(outcome.capture.guards)
    assert "TENSOR_MATCH" in built and "EMPTY_NN_MODULE_HOOKS_DICT" in built  # the setting guards empty hook dicts
    assert set(built) <= set(guard_kinds()), set(built) - set(guard_kinds())


def test_guard_kinds_fold_into_the_summary_and_both_reports(tmp_path):
    from campaigns.folder import markdown
    from reports.html import render_html

    known = ["EQUALS_MATCH", "HASATTR", "TENSOR_MATCH", "TYPE_MATCH"]
    programs = [["TENSOR_MATCH", "TYPE_MATCH"], ["TENSOR_MATCH"], ["TENSOR_MATCH", "EQUALS_MATCH"]]
    merged = Ledger()
    merged.apply({"event": "start", "at": 0.0, "config": {"guard_kinds": known}})
    shards = [Ledger(), Ledger()]
    for k, kinds in enumerate(programs):
        for ledger in (merged, shards[k % 2]):
            ledger.apply({"event": "program", "id": str(k), "guard_kinds": kinds})
    g = merged.summary()["guard_kinds"]
    assert g == {"built": {"TENSOR_MATCH": 3, "TYPE_MATCH": 1, "EQUALS_MATCH": 1}, "known": 4, "never": ["HASATTR"]}
    assert sum((Counter(s.summary()["guard_kinds"]["built"]) for s in shards), Counter()) == Counter(g["built"])
    assert "known" not in shards[0].summary()["guard_kinds"]  # a log with no start event: no universe to compare
    assert guard_coverage.line(g) == "guard kinds built: 3 of the 4 this torch's GuardBuilder has; never: HASATTR"
    summary = {**merged.summary(), "findings": []}
    text = markdown(summary)
    assert "## Guard kinds" in text and "| `TENSOR_MATCH` | 3 |" in text and "never: HASATTR" in text
    page = render_html(summary, tmp_path)
    assert 'id="guard-kinds-built"' in page and "<code>HASATTR</code>" in page
