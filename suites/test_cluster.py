"""Campaigns on a scheduler: the shard from the scheduler's variables, one
command line for a first run and every requeue, a wall-clock deadline,
once-only follow-ups across shards through a folder of claims, and a merge
that can run while the shards write. The end-to-end test runs shards as a
job array through submitit's local executor, preempts and requeues them,
and checks the merged report against one campaign of the same programs."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from campaigns import claims as claims_module, scheduler
from campaigns.budget import NotStarted, plan
from campaigns.claims import Claims
from harness import warm
from reports.ledger import LOG, Ledger

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "examples" / "cluster"


def _harness(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not any(k == s.index or k == s.count for s in scheduler.SOURCES)}
    return warm.run(["-m", "harness", *args], timeout=timeout, cwd=ROOT, env={**clean, "PYTHONPATH": str(ROOT), **(env or {})})


# -- the shard from the environment ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, env, expected", [
    ("auto", {"DEDUP_HARNESS_SHARD_INDEX": "2", "DEDUP_HARNESS_SHARD_COUNT": "3"}, (2, 3)),
    ("auto", {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8"}, (5, 8)),
    ("auto", {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"}, (3, 4)),
    ("auto", {"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0",
              "SLURM_ARRAY_TASK_STEP": "2"}, (3, 4)),
    ("auto/4", {"JOB_COMPLETION_INDEX": "1"}, (1, 4)),
    ("auto", {"JOB_COMPLETION_INDEX": "1", "DEDUP_HARNESS_SHARD_COUNT": "4"}, (1, 4)),
    ("auto", {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "2"}, (0, 2)),
    ("auto", {"SHARD_NUMBER": "3", "NUM_TEST_SHARDS": "3"}, (2, 3)),
    ("auto", {"SGE_TASK_ID": "2", "SGE_TASK_FIRST": "1", "DEDUP_HARNESS_SHARD_COUNT": "2"}, (1, 2)),
    # a launcher's variables and Slurm's agree (submitit on Slurm sets both)
    ("auto", {"DEDUP_HARNESS_SHARD_INDEX": "1", "DEDUP_HARNESS_SHARD_COUNT": "2", "SLURM_ARRAY_TASK_ID": "1",
              "SLURM_ARRAY_TASK_COUNT": "2"}, (1, 2)),
])
def test_shard_auto_reads_each_schedulers_variables(spec, env, expected):
    assert scheduler.shard(spec, env) == expected


@pytest.mark.parametrize("spec, env, says", [
    ("auto", {}, "no scheduler variables in the environment"),
    ("auto", {"SLURM_ARRAY_TASK_ID": "x1", "SLURM_ARRAY_TASK_COUNT": "2"}, "SLURM_ARRAY_TASK_ID='x1' is not an index"),
    ("auto", {"JOB_COMPLETION_INDEX": "1"}, "no shard count; pass --shard auto/N"),
    ("auto/2", {"JOB_COMPLETION_INDEX": "2"}, "outside 0..1"),
    ("auto/3", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"}, "shard count given is 3"),
    ("auto", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2", "JOB_COMPLETION_INDEX": "1",
              "DEDUP_HARNESS_SHARD_COUNT": "2"}, "disagree"),
    ("auto", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_ARRAY_TASK_STEP": "2"}, "not on the array"),
    ("auto/0", {"DEDUP_HARNESS_SHARD_INDEX": "0"}, "positive count"),
])
def test_shard_auto_refuses_what_it_cannot_read(spec, env, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(".", r"\.")):
        scheduler.shard(spec, env)


def test_until_reads_iso_epoch_and_durations():
    assert scheduler.until("2026-11-27T06:00:00+00:00") == 1_795_759_200.0
    assert scheduler.until("@1795759200") == 1_795_759_200.0
    assert scheduler.until("+90m", now=1000.0) == 1000.0 + 5400
    assert scheduler.until("+2h", now=0.0) == 7200.0
    with pytest.raises(ValueError, match="not a time"):
        scheduler.until("tomorrow")


# -- one command line for first runs and requeues ------------------------------------------------------------------

def _log(folder: Path, events: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LOG).write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


def _start(at: float, shard: str = "0/1", seed: int = 0, backend: str = "aot_eager") -> dict:
    return {"event": "start", "at": at, "config": {"backend": backend, "torch": "2.13.0", "seed": seed, "shard": shard,
                                                     "mode": "train", "workers": 1}}


def test_a_killed_invocation_counts_its_seconds_and_a_resume_auto_gets_what_is_left(tmp_path):
    # first invocation: stopped cleanly after 40 s; second: killed (no stop event) 25 s after its start
    out = _log(tmp_path / "run", [_start(100), {"event": "program", "id": "0-0-0", "at": 120},
                                  {"event": "stop", "at": 140, "seconds": 40.0},
                                  _start(200), {"event": "program", "id": "0-0-1", "at": 225}])
    ledger = Ledger.load(out)
    assert ledger.active == 65.0 and ledger.done == {"0-0-0", "0-0-1"} and not ledger.complete
    assert plan(out, 100.0, 0, "auto", None) == (35.0, 2)  # the campaign's budget, less what ran
    assert plan(out, 100.0, 0, True, None) == (100.0, 0)  # plain --resume: another budget
    assert plan(tmp_path / "fresh", 100.0, 0, "auto", None) == (100.0, 0)  # nothing there yet: a first run
    with pytest.raises(NotStarted, match="has run its --budget"):
        plan(out, 60.0, 0, "auto", None)
    with pytest.raises(NotStarted, match="has run its 2 programs"):
        plan(out, 100.0, 2, "auto", None)
    with pytest.raises(NotStarted, match="has passed"):
        plan(out, 100.0, 0, "auto", time.time() - 1)
    seconds, _ = plan(out, 100.0, 0, "auto", time.time() + 10)
    assert 9 < seconds <= 10
    # a start after an abort clears it; a stop says whether the invocation ran out its budget
    ledger.apply({"event": "aborted", "at": 230, "reason": "stopped by SIGTERM"})
    ledger.apply(_start(300))
    ledger.apply({"event": "stop", "at": 310, "seconds": 10.0, "complete": True})
    assert ledger.aborted == "" and ledger.complete


def test_past_until_and_a_spent_requeue_exit_at_once_writing_nothing(tmp_path):
    done = _harness("fuzz", "--until", "2020-01-01T00:00", "--out", str(tmp_path / "new"))
    assert done.returncode == 0 and "campaign not started: --until 2020-01-01T00:00:00" in done.stderr, done.stderr
    assert not (tmp_path / "new").exists()
    out = _log(tmp_path / "spent", [_start(100), {"event": "stop", "at": 200, "seconds": 100.0, "complete": True}])
    before = (out / LOG).read_text()
    done = _harness("fuzz", "--resume", "auto", "--budget", "100", "--out", str(out))
    assert done.returncode == 0 and "has run its --budget (100 of 100 s)" in done.stderr, done.stderr
    assert (out / LOG).read_text() == before and [p.name for p in out.iterdir()] == [LOG]


@pytest.mark.parametrize("args, env, says", [
    (["fuzz", "--shard", "auto"], {}, "error: --shard auto: no scheduler variables"),
    (["fuzz", "--shard", "auto/2"], {"JOB_COMPLETION_INDEX": "one"}, "error: --shard auto: JOB_COMPLETION_INDEX='one'"),
    (["fuzz", "--shard", "2/x"], {}, "error: argument --shard: shard '2/x'"),
    (["fuzz", "--until", "soon"], {}, "error: --until 'soon': not a time"),
    (["fuzz", "--resume", "later"], {}, "error: argument --resume"),
])
def test_bad_scheduler_input_is_one_error_line(tmp_path, args, env, says):
    done = _harness(*args, "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 2 and done.stderr.startswith(says) and len(done.stderr.strip().splitlines()) == 1, \
        done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("second, says", [
    (dict(shard="1/2", seed=1), "differ in seed"),
    (dict(shard="1/2", backend="inductor"), "differ in backend"),
    (dict(shard="0/2"), "shard 0/2 given twice"),
    (dict(shard="1/3"), "cut in different counts"),
])
def test_merging_shards_of_different_campaigns_is_one_error_line(tmp_path, second, says):
    a = _log(tmp_path / "a", [_start(1, shard="0/2"), {"event": "stop", "at": 2, "seconds": 1.0}])
    b = _log(tmp_path / "b", [_start(1, **second), {"event": "stop", "at": 2, "seconds": 1.0}])
    done = _harness("report", "merge", str(a), str(b), "--out", str(tmp_path / "merged"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "merged").exists()


# -- claims ------------------------------------------------------------------------------------------------------

def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_one_shard_claims_a_root_cause_and_a_gone_shards_claim_is_taken_over(tmp_path, monkeypatch):
    a = Claims(tmp_path, "key", "0/2", tmp_path / "a")
    b = Claims(tmp_path, "key", "1/2", tmp_path / "b")
    assert a.take("sig") == (True, "")
    mine, who = b.take("sig")
    assert not mine and who.startswith("claimed by shard 0/2")
    a.done("sig")
    assert not b.take("sig")[0] and a.read("sig")["state"] == "done"  # done: never taken over

    # a claim whose owner died on this host is stale at once
    a.take("other")
    path = a._path("other")
    claim = json.loads(path.read_text())
    path.write_text(json.dumps({**claim, "owner": {**claim["owner"], "pid": _dead_pid()}}))
    assert b.take("other") == (True, "taken over from shard 0/2")
    assert not a.take("other")[0] if "other" not in a.held else True
    # one on another host is stale once its heartbeat stops
    c = Claims(tmp_path, "key", "1/2", tmp_path / "c", stale=0.2)
    a.take("third")
    path = a._path("third")
    claim = json.loads(path.read_text())
    path.write_text(json.dumps({**claim, "owner": {**claim["owner"], "host": "elsewhere"}}))
    assert not c.take("third")[0]
    time.sleep(0.3)
    assert c.take("third")[0]
    # a stopping shard gives its unfinished claims up; the next shard takes them
    d = Claims(tmp_path, "key", "0/2", tmp_path / "d")
    assert d.take("fourth")[0]
    d.release()
    assert b.take("fourth") == (True, "")
    # claims of another campaign in the same folder are apart
    assert Claims(tmp_path, claims_module.campaign_key("inductor", 0, "2.13", "train"), "0/2", tmp_path).take("sig")[0]


# -- the draw --------------------------------------------------------------------------------------------------------

def _first_batches(shard, n):
    from campaigns.campaign import draw

    return [(pid, p.to_json()) for pid, p in itertools.islice(draw(0, shard, set()), n)]


def test_shards_of_one_seed_never_draw_one_program_and_together_draw_the_single_stream():
    single = _first_batches((0, 1), 80)
    batch0 = [x for x in single if x[0].split("-")[1] == "0"]
    batch1 = [x for x in single if x[0].split("-")[1] == "1"]
    s0 = _first_batches((0, 2), len(batch0))
    s1 = _first_batches((1, 2), len(batch1))
    assert s0 == batch0 and s1 == batch1  # the same programs, in the same order, under the same ids
    assert not {p for _, p in s0} & {p for _, p in s1}


# -- merging while the shards write --------------------------------------------------------------------------------

def _finding(sig: str, pid: str, at: float) -> dict:
    return {"event": "finding", "id": pid, "at": at, "signature": sig, "oracle": "differential", "kind": "crash",
            "severity": "wrong", "culprit": "backend", "known_issue": None, "message": sig, "size": 10, "layer": "",
            "folder": "findings/" + sig, "driver": "differential", "variant": None}


def test_merge_watch_rebuilds_as_shards_append_and_stops_when_every_shard_is_done(tmp_path):
    from campaigns.merge import watch

    a = _log(tmp_path / "shard-0", [_start(1, "0/2"), {"event": "program", "id": "0-0-0", "at": 2}])
    (a / "findings" / "x").mkdir(parents=True)
    (a / "findings" / "x" / "repro.py").write_text("# x\n")

    def shards_go_on():
        time.sleep(1.0)
        with open(a / LOG, "a") as f:
            f.write(json.dumps(_finding("x", "0-0-0", 3)) + "\n")
            f.write('{"event": "program", "id": "0-0-1", "at": 4')  # being written: left for the next round
        time.sleep(1.0)
        with open(a / LOG, "a") as f:
            f.write("}\n" + json.dumps({"event": "stop", "at": 5, "seconds": 4.0, "complete": True}) + "\n")
        _log(tmp_path / "shard-1", [_start(1, "1/2"), {"event": "program", "id": "0-1-0", "at": 2},
                                    _finding("x", "0-1-0", 3), {"event": "stop", "at": 4, "seconds": 3.0,
                                                                 "complete": True}])

    seen = []
    writer = threading.Thread(target=shards_go_on)
    writer.start()
    summary = watch([str(tmp_path / "shard-*")], tmp_path / "merged", 0.2, time.time() + 60,
                    lambda line, final: seen.append(line))
    writer.join()
    assert summary["programs"] == 3 and {f["signature"]: f["count"] for f in summary["findings"]} == {"x": 2}
    assert summary["seconds"] == 7.0 and summary["shard"].startswith("merged from 2 of 2")
    assert len(seen) >= 3  # rebuilt while the shards wrote
    assert (tmp_path / "merged" / "findings" / "x" / "repro.py").exists()
    assert not list((tmp_path / "merged").glob(".*"))  # no staging files left behind


# -- end to end: a job array through submitit ---------------------------------------------------------------------

COMMON = ["--backend", "suites.planted:raises_on_seven", "--seed", "0", "--workers", "1", "--oracles", "differential",
          "--door-share", "0", "--lint-share", "0", "--minimize-seconds", "5", "--no-verify", "--budget", "600",
          "--timeout", "60"]
PLANTED = "raises_on_seven"


def _launcher():
    spec = importlib.util.spec_from_file_location("submitit_launcher", CLUSTER / "submitit_launcher.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _preempt(job) -> None:
    """What Slurm does to a preempted job: submitit's signal to the job's
    task (the local executor's controller passes on only its timeout's)."""
    from submitit.local.local import LocalJobEnvironment

    controller = job._process.pid
    (task,) = map(int, Path(f"/proc/{controller}/task/{controller}/children").read_text().split())
    os.kill(task, LocalJobEnvironment._usr_sig())


def _events(folder: Path) -> list[dict]:
    from reports.ledger import read_events

    return read_events(folder / LOG)


def _counts(summary: dict) -> dict:
    return {f["signature"]: f["count"] for f in summary["findings"]}


def _array(tmp_path, shards: int, single: bool = True):
    """A job array of ``shards`` shards of one batch each, and (``single``)
    one campaign of the same programs (as many batches) run beside it."""
    pytest.importorskip("submitit", reason="submitit is in the cluster extra: make test installs it")
    launcher = _launcher()
    single = single and subprocess.Popen([sys.executable, "-m", "harness", "fuzz", *COMMON, "--batches", str(shards),
                                          "--out", str(tmp_path / "single")], cwd=ROOT, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.environ["PYTHONPATH"] = str(ROOT)  # the jobs' environment (submitit copies this process's)
    _, jobs = launcher.launch(shards, tmp_path / "array", [*COMMON, "--batches", "1"], cluster="local",
                              timeout_min=30)
    return launcher, jobs, single


def _check_against_single(tmp_path, shards: int, jobs, single, requeued: set):
    """The merged shards checked; with a ``single`` campaign beside them,
    checked equal to it. (Without it, the gate's case: that the shards draw
    exactly the single stream's programs is test_shards_of_one_seed_never_draw_one_program_and_together_draw_the_single_stream's.)"""
    for job in jobs:
        job.result()
    folders = [tmp_path / "array" / f"shard-{i}" for i in range(shards)]
    done = _harness("report", "merge", *map(str, folders), "--out", str(tmp_path / "merged"))
    assert done.returncode == 0, done.stderr[-3000:]
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    alone = [json.loads((f / "summary.json").read_text()) for f in folders]
    assert merged["programs"] == sum(a["programs"] for a in alone) > 0, merged["programs"]
    if single:
        assert single.wait(600) == 0, single.stderr.read()[-3000:]
        one = json.loads((tmp_path / "single" / "summary.json").read_text())
        # the merged shards are the one campaign: same programs, same findings, same hits
        assert merged["programs"] == one["programs"] and _counts(merged) == _counts(one), (_counts(merged), _counts(one))
    planted = [s for s in _counts(merged) if PLANTED in s]
    assert planted, _counts(merged)
    for i in requeued:  # killed mid-campaign, requeued with the same command line, went on
        events = _events(folders[i])
        assert sum(e["event"] == "start" for e in events) == 2
        assert any(e["event"] == "aborted" and "SIGTERM" in e["reason"] for e in events)
        ids = [e["id"] for e in events if e["event"] == "program"]
        assert len(ids) == len(set(ids)), "a program ran twice"
    # each new root cause was minimized once, by one shard, the others counting their hits (a shard whose
    # program would not minimize gives its claim up to one whose program does)
    events = [e for f in folders for e in _events(f)]
    # a hit from a run with a known crash taken away (unmasked) is minimized from that run, not the full program
    assert not [e for e in events if e["event"] == "minimize_failed"], [e for e in events if e["event"] == "minimize_failed"]
    for sig in planted:
        minimized = [e for e in events if e["event"] == "minimized" and e["signature"] == sig and "minimized" in e]
        assert len(minimized) == 1, (sig, minimized)
        assert next(f for f in merged["findings"] if f["signature"] == sig)["minimized"]
    met_by_all = [s for s in planted if all(any(e["event"] == "finding" and e["signature"] == s for e in _events(f))
                                            for f in folders)]
    assert met_by_all, "no planted root cause met by every shard: nothing to follow up once"
    assert any(e["event"] == "follow_up" and e.get("claimed") for e in events)
    return merged


# Nightly, both: two shards preempted, requeued and merged, minimizing their root cause once (35 s: three
# cold jobs through submitit), and their merge against one campaign of the same programs run beside them
# (half again the work). The gate keeps their parts: the shards' streams (test_shards_of_one_seed_...), a
# killed invocation resumed (test_a_killed_invocation_...), root-cause claims across shards
# (test_one_shard_claims_...) and merge --watch of shard folders (test_merge_watch_...).
@pytest.mark.nightly
@pytest.mark.parametrize("single", [pytest.param(True, id="equal_one_campaign"), pytest.param(False, id="merged")])
@pytest.mark.long(seconds=45)
def test_two_shards_through_submitit_preempted_requeued_and_merged(tmp_path, single):
    launcher, jobs, single = _array(tmp_path, 2, single)
    # preempt shard 0 once it has run a few programs: submitit's checkpoint stops the campaign, the job is requeued
    log = tmp_path / "array" / "shard-0" / LOG
    deadline = time.time() + 300
    while time.time() < deadline and sum(e["event"] == "program" for e in _events(log.parent)) < 4:
        time.sleep(0.5)
    _preempt(jobs[0])
    # merged while the array runs: what is there so far is one report
    while time.time() < deadline and not (log.exists() and sum(e["event"] == "start" for e in _events(log.parent)) == 2):
        time.sleep(0.5)
    done = _harness("report", "merge", str(tmp_path / "array" / "shard-*"), "--out", str(tmp_path / "live"),
                    "--watch", "1", "--until", "+1s")
    assert done.returncode == 0, done.stderr[-2000:]
    live = json.loads((tmp_path / "live" / "summary.json").read_text())
    assert live["programs"] > 0 and (tmp_path / "live" / "report.md").exists()
    _check_against_single(tmp_path, 2, jobs, single, requeued={0})


@pytest.mark.nightly
def test_three_shards_through_submitit_each_preempted_once_merge_equal_to_one_campaign(tmp_path):
    launcher, jobs, single = _array(tmp_path, 3)
    for i, job in enumerate(jobs):
        folder = tmp_path / "array" / f"shard-{i}"
        deadline = time.time() + 300
        while time.time() < deadline and sum(e["event"] == "program" for e in _events(folder)) < 3:
            time.sleep(0.5)
        _preempt(job)
    _check_against_single(tmp_path, 3, jobs, single, requeued={0, 1, 2})


# -- the examples work as written ----------------------------------------------------------------------------------

def test_the_sbatch_script_runs_a_shard_from_slurms_variables(tmp_path):
    done = subprocess.run(["bash", str(CLUSTER / "sbatch_array.sh")], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHON": sys.executable,
                                         "SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4",
                                         "RUNS": str(tmp_path / "nightly"), "UNTIL": "2020-01-01T00:00"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"shard 3/4 ({tmp_path / 'nightly' / 'shard-3'}): campaign not started: --until" in done.stderr


def test_the_kubernetes_manifest_and_ci_matrix_run_a_shard_from_their_variables(tmp_path):
    yaml = pytest.importorskip("yaml", reason="PyYAML is in the cluster extra: make test installs it")
    job = yaml.safe_load((CLUSTER / "k8s_indexed_job.yaml").read_text())
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["DEDUP_HARNESS_SHARD_COUNT"]) == job["spec"]["completions"]
    argv = [a.replace("/runs", str(tmp_path)) for a in container["args"]]
    done = _harness(*container["command"][3:], *argv, "--until", "@0", env={**env, "JOB_COMPLETION_INDEX": "2"})
    assert done.returncode == 0 and f"shard 2/4 ({tmp_path}/nightly/shard-2)" in done.stderr, done.stderr

    workflow = yaml.safe_load((CLUSTER / "ci_matrix.yml").read_text())
    shard = workflow["jobs"]["shard"]
    (run,) = [s["run"] for s in shard["steps"] if "harness fuzz" in s.get("run", "")]
    argv = run.split()[3:]  # after `.venv/bin/python -m harness`
    env = {k: str(v).replace("${{ matrix.shard }}", "1") for k, v in shard["env"].items()}
    assert len(shard["strategy"]["matrix"]["shard"]) == int(env["DEDUP_HARNESS_SHARD_COUNT"])
    done = _harness(*[a.replace("runs/", f"{tmp_path}/") for a in argv], "--until", "@0", env=env)
    assert done.returncode == 0 and f"shard 1/4 ({tmp_path}/nightly/shard-1)" in done.stderr, done.stderr
