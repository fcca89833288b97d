"""The books of a campaign: the event log folds into the summary; shards
merge; two runs diff into new, fixed and persisting; a finding is promoted to
a known issue in one step. Synthetic logs: nothing is compiled here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports import known_issues
from campaigns.merge import merge
from reports.ledger import LOG, Ledger, read_events
from reports.regression import diff, promote
from harness import warm

pytestmark = pytest.mark.unit

KI001 = known_issues.ROOT / "KI-001-dedup-merges-float-constants"


def _finding(sig: str, pid: str, at: float, size: int = 10, known=None) -> dict:
    return {"event": "finding", "id": pid, "at": at, "signature": sig, "oracle": sig.split(":")[0], "kind": "mismatch",
            "severity": "wrong", "culprit": "dedup", "known_issue": known, "message": f"{sig} failed", "size": size,
            "layer": "", "folder": "findings/" + sig.replace(":", "-"), "driver": "differential", "variant": None}


def _write_run(folder: Path, seed: int, events: list[dict], shard: str = "0/1") -> Path:
    folder.mkdir(parents=True)
    start = {"event": "start", "at": events[0]["at"] - 1,
             "config": {"backend": "aot_eager", "torch": "2.13.0", "seed": seed, "shard": shard, "workers": 1}}
    with open(folder / LOG, "w") as f:
        for e in [start, *events, {"event": "stop", "at": events[-1]["at"], "seconds": 10.0}]:
            f.write(json.dumps(e) + "\n")
        f.write('{"event": "program", "id": "cut-sho')  # a line cut short by a kill is skipped
    (folder / "campaign.json").write_text(json.dumps({"workers": 1}))
    for e in events:
        if e["event"] == "finding":
            d = folder / e["folder"]
            d.mkdir(parents=True, exist_ok=True)
            (d / "repro.py").write_text(f"# repro from {folder.name} size {e['size']}\n")
            (d / "program.json").write_text((KI001 / "program.json").read_text())
            (d / "meta.json").write_text(json.dumps({**e, "backend": "aot_eager", "config": {"use_graph_deduplication": True}}))
    return folder


def _program(pid: str, at: float) -> dict:
    return {"event": "program", "id": pid, "at": at, "stages": {"compiled": 1.0}, "verdicts": {"pass": 3},
            "deduplicated": True, "changed": ["repeat"], "recompiled": [], "features": ["op:sin"]}


def test_the_log_folds_into_counts_hits_and_a_timeline(tmp_path):
    run = _write_run(tmp_path / "a", 0, [_program("0-0-0", 10), _finding("differential:mismatch:dedup:arg:float", "0-0-0", 10, 30),
                                          _program("0-0-1", 11), _finding("differential:mismatch:dedup:arg:float", "0-0-1", 11, 20),
                                          {"event": "lost", "id": "0-0-2", "at": 12, "kind": "hang", "detail": "x"}])
    ledger = Ledger.load(run)
    s = ledger.summary()
    assert s["programs"] == 2 and s["seconds"] == 10.0 and s["workers_lost"] == {"hang": 1}
    assert ledger.done == {"0-0-0", "0-0-1", "0-0-2"}
    (f,) = s["findings"]
    assert f["count"] == 2 and f["size"] == 20 and f["program_id"] == "0-0-1"  # the smallest program that hits it
    assert s["timeline"][-1] == {"t": 3.0, "programs": 2, "failures": 2, "distinct": 1}
    assert s["generator"] == {"op:sin": 2}
    assert len(read_events(run / LOG)) == 7


def test_shards_merge_into_one_campaign(tmp_path):
    a = _write_run(tmp_path / "a", 0, [_program("0-0-0", 10), _finding("x:mismatch:dedup", "0-0-0", 10, size=50)], "0/2")
    b = _write_run(tmp_path / "b", 0, [_program("0-1-0", 10.5), _finding("x:mismatch:dedup", "0-1-0", 10.5, size=5),
                                        _finding("y:crash:backend", "0-1-0", 10.6)], "1/2")
    s = merge([a, b], tmp_path / "merged")
    assert s["programs"] == 2 and {f["signature"]: f["count"] for f in s["findings"]} == {"x:mismatch:dedup": 2, "y:crash:backend": 1}
    x = next(f for f in s["findings"] if f["signature"] == "x:mismatch:dedup")
    assert "from b size 5" in (tmp_path / "merged" / x["folder"] / "repro.py").read_text()  # the smaller program's folder
    assert (tmp_path / "merged" / "report.html").exists() and (tmp_path / "merged" / "junit.xml").exists()


def test_diff_names_new_fixed_and_persisting(tmp_path):
    a = _write_run(tmp_path / "a", 0, [_program("0-0-0", 10), _finding("old:crash:dedup", "0-0-0", 10),
                                        _finding("both:mismatch:dedup", "0-0-0", 10, known="KI-001")])
    b = _write_run(tmp_path / "b", 0, [_program("0-0-0", 10), _finding("new:crash:backend", "0-0-0", 10),
                                        _finding("both:mismatch:dedup", "0-0-0", 10, known="KI-001")])
    text, counts = diff(a, b)
    assert counts == {"new": 1, "fixed": 1, "persisting": 1}
    new, fixed, persisting = (text.split("## ")[i] for i in (1, 2, 3))
    assert "`new:crash:backend`" in new and "`old:crash:dedup`" in fixed and "`both:mismatch:dedup`" in persisting
    done = warm.run(["-m", "harness", "report", "diff", str(a), str(b), "--out", str(tmp_path / "d.md")], timeout=120)
    assert done.returncode == 0 and (tmp_path / "d.md").read_text() == text


def test_promote_makes_a_finding_a_known_issue(tmp_path):
    run = _write_run(tmp_path / "a", 0, [_program("0-0-0", 10), _finding("differential:mismatch:dedup:arg:float", "0-0-0", 10)])
    finding = run / "findings" / "differential-mismatch-dedup-arg-float"
    root = tmp_path / "known"
    folder = promote(finding, "KI-900", "Floats merged again", root=root)
    (issue,) = known_issues.load(root)
    assert issue.id == "KI-900" and issue.matches("differential:mismatch:dedup:arg:float") and issue.backend == "aot_eager"
    assert sorted(f.name for f in folder.iterdir()) == ["issue.json", "program.json"]  # data: its script is rendered
    assert issue.render().startswith('"""Repro: KI-900: Floats merged again')
    with pytest.raises(ValueError, match="KI-900 already exists"):
        promote(finding, "KI-900", "again", root=root)
    with pytest.raises(ValueError, match="expected KI-<number>"):
        promote(finding, "bug-1", "x", root=root)
    known_issues.load.cache_clear()
