"""The main job end to end: a short campaign writes a complete report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def _harness(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_short_campaign_writes_report(tmp_path, request):
    out = tmp_path / "run"
    done = _harness("fuzz", "--budget", "8", "--seed", "3", "--out", str(out), cwd=request.config.rootpath)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"report: {out / 'report.md'}" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["programs"] > 0 and summary["backend"] == "aot_eager"
    assert (out / "report.md").read_text().startswith("# Fuzz campaign")
    for finding in summary["findings"]:
        folder = out / finding["folder"]
        assert {"program.json", "repro.py", "meta.json", "log.txt"} <= {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("args, message", [
    (["--backend", "no_such"], "error: unknown backend 'no_such'"),
    (["--oracles", "telepathy"], "error: unknown oracle(s) telepathy"),
])
def test_bad_campaign_input_is_one_line(tmp_path, request, args, message):
    done = _harness("fuzz", "--budget", "1", "--out", str(tmp_path / "x"), *args, cwd=request.config.rootpath)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message) and len(done.stderr.strip().splitlines()) == 1
