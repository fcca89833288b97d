"""A task handler that misbehaves on request, to test the worker pool's
supervision without torch: abort, segfault, hang, runaway memory, raise."""

from __future__ import annotations

import ctypes
import os
import signal
import time

STARTED: list[int] = []


def init(arg) -> None:
    STARTED.append(os.getpid())


def handle(task: dict):
    what = task.get("do", "echo")
    if what == "abort":
        os.abort()
    if what == "segfault":
        ctypes.string_at(0)
    if what == "hang":
        time.sleep(3600)
    if what == "memory":
        hog = []
        while True:
            hog.append(bytearray(64 * 1024 * 1024))
            hog[-1][::4096] = b"x" * len(hog[-1][::4096])
            time.sleep(0.01)
    if what == "raise":
        raise ValueError("planted handler error")
    if what == "restart":
        return {"pid": os.getpid(), "restart": True}
    if what == "terminated":  # a scheduler stopping the job signals every process in it
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    if what == "env":  # held a second, so the next task goes to the other worker
        time.sleep(1)
        return {"pid": os.getpid(), "env": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "later": os.environ.get("DEDUP_WORKER_TEST")}
    return {"pid": os.getpid(), "echo": task.get("id")}
