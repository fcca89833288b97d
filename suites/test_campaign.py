"""The main job end to end: a campaign in worker processes survives a
backend that aborts or hangs and writes every report; bad input is one line.
Resuming (a requeue with the same command line) is test_cluster.py's."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import xml.etree.ElementTree as ET

import pytest
import torch
from harness import warm
from suites import tempdirs

pytestmark = pytest.mark.unit

# Seed 13 meets a hang on its sixth program and an abort on its seventh: a campaign of eight programs meets
# both (a hang is a 2 s deadline, then 6 s to confirm it)
PLANTED = ["--backend", "suites.planted:abort_or_hang", "--sweep", "off", "--timeout", "2", "--seed", "13", "--oracles", "differential",
           "--minimize-seconds", "0", "--programs", "8"]


def _harness(*args: str, cwd, timeout: int = 400, env: dict | None = None) -> subprocess.CompletedProcess:
    return warm.run(["-m", "harness", *args], timeout=timeout, cwd=cwd, env=env)


@pytest.mark.long(seconds=40)
def test_a_campaign_survives_an_aborting_and_hanging_backend_and_reports(tmp_path, request):
    out, root = tmp_path / "run", request.config.rootpath
    with tempdirs.fresh_tmp() as tmp:
        done = _harness("fuzz", *PLANTED, "--budget", "120", "--workers", "2", "--out", str(out), cwd=root,
                        env=tempdirs.env(tmp))
        assert done.returncode == 0, done.stderr[-3000:]
        # left nothing behind, though workers were killed (suites/test_tempdirs.py)
        assert tempdirs.left(tmp) == [], "the campaign left these in its temporary directory"
    summary = json.loads((out / "summary.json").read_text())
    events = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]

    # survived: both kinds of lost worker are findings of their own, named by
    # faulthandler's innermost frame, and the other programs ran and were judged
    signatures = {f["signature"]: f for f in summary["findings"]}
    abort = signatures.get("worker:signal:SIGABRT:planted.py:abort_or_hang")
    hang = signatures.get("worker:hang:planted.py:abort_or_hang")
    assert abort and hang, (list(signatures), done.stdout[-2000:])
    assert abort["severity"] == hang["severity"] == "process"
    assert any(e["event"] == "hang_retry" for e in events)  # a hang is confirmed with a longer deadline first
    assert summary["programs"] > 0
    # its repro, run standalone by the campaign's own verification, reproduced it (exit 1: died by the signal)
    assert abort["repro_exit"] == 1, abort

    # reported: summary, Markdown, HTML, JUnit, the event log, one folder per finding
    assert f"report: {out / 'report.md'}" in done.stdout
    assert summary["timeline"] and summary["timeline"][-1]["programs"] == summary["programs"]
    assert (out / "report.md").read_text().startswith("# Fuzz campaign")
    assert "<html" in (out / "report.html").read_text()
    assert int(ET.parse(out / "junit.xml").getroot().find("testsuite").get("tests")) == len(summary["findings"]) + 1
    assert {"start", "program", "finding", "lost", "stop"} <= {e["event"] for e in events}
    for finding in summary["findings"]:
        folder = out / finding["folder"]
        assert {"program.json", "repro.py", "meta.json", "log.txt"} <= {p.name for p in folder.iterdir()}
        meta = json.loads((folder / "meta.json").read_text())
        assert {"signature", "oracle", "backend", "torch", "config", "seed", "first_seen", "count"} <= set(meta)


@pytest.mark.parametrize("args, message", [
    (["--backend", "no_such"], "error: unknown backend 'no_such'"),
    (["--backend", "no.such.module:fn"], "error: backend 'no.such.module:fn': cannot import 'no.such.module'"),
    (["--backend", "suites.planted:not_a_backend"], "error: backend 'suites.planted:not_a_backend': 'not_a_backend' is a int"),
    (["--oracles", "telepathy"], "error: unknown oracle(s) telepathy"),
    (["--config", "dynamo.no_such_key=1"], "error: config 'dynamo.no_such_key=1': torch has no dynamo config"),
    (["--config", "nonsense"], "error: config 'nonsense': expected SECTION.KEY=VALUE"),
    (["--shard", "3/2"], "error: shard 3/2: expected i/N with 0 <= i < N"),
    (["--resume"], "error: --resume: no campaign in"),
    *([(["--oracles", "cudagraph"], "error: oracles cudagraph replay CUDA graphs on cuda, but torch.cuda.is_available() "
                                    "is False here")] if not torch.cuda.is_available() else []),
])
def test_bad_campaign_input_is_one_line(tmp_path, request, args, message):
    done = _harness("fuzz", "--budget", "1", "--out", str(tmp_path / "x"), *args, cwd=request.config.rootpath)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message) and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.nightly  # a campaign of its own (34 s); the CUDA-graph oracle's planted faults run in the gate
def test_a_cuda_graph_campaign_on_cpu_reports_stale_outputs_and_engagement(tmp_path, request):
    """The replay oracles in a campaign (``--device cpu``), on a backend
    planted to hand out reused output buffers: a stale-output finding whose
    repro reproduces standalone, and engagement counted per run."""
    out = tmp_path / "cg"
    done = _harness("fuzz", "--backend", "suites.planted_cudagraphs:reused_buffers", "--oracles",
                    "cudagraph,cudagraph_engaged", "--device", "cpu", "--budget", "30", "--workers", "1",
                    "--minimize-seconds", "0", "--out", str(out), cwd=request.config.rootpath)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    stale = [f for f in summary["findings"] if f["signature"].startswith("cudagraph:stale_output:cudagraphs:")
             and ":output" in f["signature"]]
    assert stale and stale[0]["repro_exit"] == 1 and stale[0]["driver"] == "replay", summary["findings"]
    assert sum(summary["cudagraphs"].values()) >= summary["programs"] >= 1, summary["cudagraphs"]
    assert "## CUDA graphs" in (out / "report.md").read_text()
    assert 'id="cudagraphs-table"' in (out / "report.html").read_text()


def test_a_minimize_task_shrinks_localizes_and_verifies_its_repro():
    """What a worker does with a new distinct finding, in this process."""
    from dataclasses import asdict

    from generators.ir import Program, to_dict
    from oracles.registry import run_config
    from campaigns import worker
    from reports.known_issues import ROOT

    program = Program.from_json((ROOT / "KI-001-dedup-merges-float-constants" / "program.json").read_text())
    task = {"type": "minimize", "signature": "differential:mismatch:dedup:arg:float", "oracle": "differential",
            "program": to_dict(program),
            "config": asdict(run_config("aot_eager", ("differential",))), "seconds": 30, "ladder_upto": "aot_eager",
            "repro_timeout": 120}
    result = worker.handle(task)
    assert result["signature"] == task["signature"] and result["known_issue"] == "KI-001"
    assert result["size"] <= result["size_before"] and result["tries"] > 0
    assert "first fails on eager" in result["layer"]
    assert result["repro_exit"] == 1  # the minimized repro, run as a user would, reproduces
    assert {"program.json", "repro.py", "log.txt"} <= set(result["files"])


def test_a_lost_worker_is_reproduced_from_the_run_it_died_in(capsys):
    """A worker taken down in a run of another program than its task's (a known crash's trigger taken away,
    a door run) wrote that run down first: the finding's program and repro are that run's, or the repro
    runs a program that never took anything down (an aborting backend's repro exited 0)."""
    from dataclasses import replace

    from generators.ir import Program
    from harness.outcome import RunConfig
    from campaigns.worker import last_run, lost_finding, running

    program = Program.from_json((Path(__file__).parent / "data" / "forward_sets_float32.json").read_text())
    other = replace(program, seed=program.seed + 1)
    running(other, RunConfig(backend="aot_eager", dedup=False))
    log = "--- task 0-1-2\n" + capsys.readouterr().out + "Fatal Python error: Aborted\n"
    found_program, found_config = last_run(log)
    assert found_program == other and found_config.dedup is False
    assert last_run("--- task 0-1-2\nFatal Python error: Aborted\n") is None
    finding = lost_finding(program, RunConfig(), "signal", "SIGABRT", log, 2.0, 1024.0)
    assert Program.from_json(finding["files"]["program.json"]) == other


def test_door_runs_on_inductor_take_their_share_of_the_workers_seconds_not_of_the_door_runs(tmp_path):
    """An inductor compile costs tens of times the campaign backend's: a share of door runs gave it most of a
    short campaign's seconds or none. The share is of the workers' seconds: none before it is earned, none
    while one is out that would overdraw it, and the mean of those finished is the price of the next."""
    from campaigns.campaign import INDUCTOR_DOOR_SECONDS, Campaign, Options
    from reports.ledger import EventLog, Ledger

    campaign = Campaign(Options(backend="aot_eager", budget=60, workers=2, out=tmp_path), ("differential",), {},
                        EventLog(tmp_path, Ledger()), started=1000.0)
    earned = INDUCTOR_DOOR_SECONDS / (0.05 * 2)  # seconds of a 2-worker campaign that pay for the first
    assert not campaign.inductor_due(0.05, 1000.0 + 0.9 * earned)
    assert campaign.inductor_due(0.05, 1000.0 + earned)
    assert not campaign.inductor_due(0.0, 1000.0 + 100 * earned)
    campaign.inductor_out = 1  # one out: the next waits for another share
    assert not campaign.inductor_due(0.05, 1000.0 + 1.5 * earned)
    campaign.on_result({"type": "run", "id": "p", "program": {}, "config": {}, "door_backend": "inductor"},
                       {"program": {"stages": {"compiled": 0.5, "door:inductor": 40.0, "unmasked:door:dedup": 20.0}},
                        "findings": []})
    assert (campaign.inductor_out, campaign.inductor_doors, campaign.inductor_seconds) == (0, 1, 60.0)
    assert not campaign.inductor_due(0.05, 1000.0 + 1000.0)  # 60 s spent, 60 more asked: 100 s of 2000
    assert campaign.inductor_due(0.05, 1000.0 + 1200.0)
