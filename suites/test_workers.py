"""The worker pool survives what a compiler under test can do to a process,
its workers spawned or forked from a forkserver that imported their modules."""

from __future__ import annotations

import time

import pytest

from campaigns.pool import Lost, Pool, PoolError

pytestmark = pytest.mark.unit

HANDLER = "suites.planted_workers:handle"
# How workers start: spawned, or forked from the forkserver (harness.warm.forkserver; its preload
# is the first one asked for in this process: a campaign's when one ran here before).
STARTS = pytest.mark.parametrize("preload", [None, ("suites.planted_workers",)], ids=["spawn", "forkserver"])


def _drain(pool: Pool, n: int, limit: float = 60.0) -> dict:
    got: dict = {}
    start = time.time()
    while len(got) < n and time.time() - start < limit:
        got.update({task["id"]: result for task, result in pool.results(0.2)})
    return got


# Spawned workers' crashes in the nightly tier (9 s): the supervision is the same code for both starts, and
# the gate spawns workers in test_feedback's campaign under --coverage.
@pytest.mark.parametrize("preload", [pytest.param(None, marks=pytest.mark.nightly), ("suites.planted_workers",)],
                         ids=["spawn", "forkserver"])
@pytest.mark.long(seconds=12)
def test_crashes_hangs_and_memory_are_lost_tasks_and_workers_are_replaced(tmp_path, preload):
    # the memory limit above what a worker forked from a server that imported torch holds by sharing
    pool = Pool(2, HANDLER, tmp_path, init="suites.planted_workers:init", timeout=3, memory_mb=800, preload=preload)
    plan = ["echo", "abort", "echo", "segfault", "hang", "memory", "raise", "restart", "echo", "echo"]
    try:
        for i, what in enumerate(plan):
            pool.submit({"id": i, "do": what})
        got = _drain(pool, len(plan))
    finally:
        pool.close(now=True)
    assert set(got) == set(range(len(plan)))
    lost = {i: (r.kind, r.detail) for i, r in got.items() if isinstance(r, Lost)}
    assert lost == {1: ("signal", "SIGABRT"), 3: ("signal", "SIGSEGV"), 4: ("hang", "no result after 3 s"),
                    5: lost[5]} and lost[5][0] == "memory" and "over the 800 MB limit" in lost[5][1]
    # faulthandler's stack of the aborting task, and of the hung one (asked before the kill)
    assert "planted_workers.py" in got[1].log_tail and "in handle" in got[4].log_tail
    assert got[6][0] == "error" and "planted handler error" in got[6][1]
    assert got[7]["restart"] and got[8]["pid"] != got[7]["pid"]  # a retired worker is replaced, nothing lost
    assert all(got[i]["echo"] == i for i in (0, 2, 9))
    assert pool.lost == {"signal": 2, "hang": 1, "memory": 1}


def test_a_handler_that_cannot_load_is_one_error(tmp_path):
    with pytest.raises(PoolError, match="workers cannot start: ModuleNotFoundError"):
        pool = Pool(1, "suites.no_such_module:handle", tmp_path)
        try:
            _drain(pool, 1, limit=30)
        finally:
            pool.close(now=True)


# Nightly under both starts since issue 42's cut to six minutes (6 s each): the gate's crash test above replaces
# lost workers through the same supervision
@pytest.mark.nightly
@STARTS
def test_a_worker_stopped_from_outside_is_not_a_crash_and_each_worker_gets_its_gpu(tmp_path, preload, monkeypatch):
    from campaigns.allocation import Allocation, worker_env

    from harness.warm import forkserver

    allocation = Allocation(cpus=2, memory_mb=None, gpus=("2", "3"))
    if preload:
        forkserver(preload)
    monkeypatch.setenv("DEDUP_WORKER_TEST", "set after the server started")  # a worker sees it, as spawned
    pool = Pool(2, HANDLER, tmp_path, timeout=30, worker_env=lambda index: worker_env(allocation, index),
                preload=preload)
    try:
        for i, what in enumerate(["env", "env", "terminated"]):
            pool.submit({"id": i, "do": what})
        got = _drain(pool, 3)
    finally:
        pool.close(now=True)
    assert got[2] == Lost("stopped", "SIGTERM", got[2].log_tail)  # the campaign runs it again; no finding
    # each worker sees one GPU of the two, its own (on a loaded machine one worker may take both tasks)
    by_pid = {got[i]["pid"]: got[i]["env"] for i in (0, 1)}
    assert set(by_pid.values()) <= {"2", "3"} and len(set(by_pid.values())) == len(by_pid)
    # and the rest of this process's environment as it is when the worker starts
    assert got[0]["later"] == got[1]["later"] == "set after the server started"
