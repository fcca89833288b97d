"""Long-lived worker processes that survive the compiler under test.

Importing torch and warming Dynamo costs seconds, so a worker pays it once and
then runs task after task. The compiler under test may segfault, abort, hang
or eat memory: the supervisor sees each (exit by signal, no answer before the
task's deadline, resident memory over the limit), reports it as a lost task
with the worker's last log lines, and starts a fresh worker. Each worker leads
its own process group, so a kill also takes any compile subprocesses it spawned.

Tasks and results are plain picklable values; what a task means is the
handler's business (``package.module:function``).

Workers are spawned (a fresh interpreter each), or, given modules to
``preload``, forked from a multiprocessing forkserver that imported them
once (``harness.warm.forkserver``): a worker replacing one the compiler took
down is then ready in a fraction of a second instead of importing torch again.
"""

from __future__ import annotations

import collections
import faulthandler
import importlib
import os
import resource
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable, Optional, Union

from harness.warm import forked_context


# Signals a scheduler stops a job with (Slurm signals every process of the job, workers too).
STOPPING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class PoolError(RuntimeError):
    """Workers cannot start (the handler fails to import or initialize)."""


@dataclass
class Lost:
    """A task whose worker died: ``kind`` is "signal", "hang", "memory" or
    "exit"; "stopped" when a signal came from outside (a scheduler stopping
    the job: SIGTERM, SIGHUP, SIGINT), which says nothing of the compiler."""

    kind: str
    detail: str
    log_tail: str = ""


@dataclass
class _Worker:
    index: int
    process: Any
    conn: Any
    log: Path
    ready: bool = False
    retiring: bool = False  # asked to be replaced after its last result
    task: Optional[dict] = None
    deadline: float = 0.0
    started: float = 0.0


def _load(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(conn, handler: str, init: Union[str, tuple[str, ...], None], init_arg: Any, log: str,
           env: Optional[dict] = None) -> None:
    """A worker's life: own process group, its own environment (before any
    import reads it: CUDA_VISIBLE_DEVICES), log to a file, init once, then tasks."""
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    os.setpgrp()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash should not spend seconds writing a core file
    with open(log, "a", buffering=1) as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        sys.stdout = sys.stderr = sink
        faulthandler.enable(file=sink)  # a segfault or abort leaves its Python stack here
        faulthandler.register(signal.SIGUSR1, file=sink, all_threads=False)  # and so does a hang, asked before the kill
        try:
            for step in (init,) if isinstance(init, str) else init or ():
                _load(step)(init_arg)
            fn = _load(handler)
        except BaseException:
            conn.send(("init_error", traceback.format_exc()))
            return
        conn.send(("ready", os.getpid()))
        while True:
            task = conn.recv()
            if task is None:
                return
            print(f"--- task {task.get('id')}", flush=True)
            try:
                result = fn(task)
            except BaseException:
                conn.send(("error", traceback.format_exc()))
                continue
            if isinstance(result, dict) and result.get("restart"):
                conn.send(("retire", result))  # the handler found this process unusable
                return
            conn.send(("ok", result))


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _tail(path: Path, lines: int = 300) -> str:
    """The log of the last task (from its marker on): a faulthandler stack is
    long, and its innermost frame comes first."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text[text.rfind("--- task"):].splitlines()[:lines])


class Pool:
    """``size`` workers running ``handler(task) -> result``; ``init(init_arg)``
    runs once per worker (a tuple of inits: each in turn, so one can start
    what must precede the next one's imports). Tasks time out after
    ``timeout`` seconds unless ``submit`` says otherwise; a worker above
    ``memory_mb`` is killed. ``preload``: modules a forkserver imports once
    for every worker (None: each worker is spawned and imports its own)."""

    def __init__(self, size: int, handler: str, log_dir: Path, init: Union[str, tuple[str, ...], None] = None,
                 init_arg: Any = None, timeout: float = 120.0, memory_mb: float = 8192.0,
                 worker_env: Optional[Callable[[int], dict]] = None, preload: Optional[tuple[str, ...]] = None):
        self.handler, self.init, self.init_arg = handler, init, init_arg
        self.worker_env = worker_env or (lambda index: {})
        self.timeout, self.memory_mb = timeout, memory_mb
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self._ctx = forked_context(preload)
        self._queue: collections.deque = collections.deque()
        self._started = 0
        self._failed_starts = 0
        self.lost: collections.Counter = collections.Counter()
        self.workers = [self._start(i) for i in range(size)]

    def _start(self, index: int) -> _Worker:
        self._started += 1
        ours, theirs = self._ctx.Pipe()
        log = self.log_dir / f"worker-{index}-{self._started}.log"
        # this process's environment as it is now, as a spawned worker would inherit it
        process = self._ctx.Process(target=_serve, args=(theirs, self.handler, self.init, self.init_arg, str(log),
                                                         {**os.environ, **self.worker_env(index)}),
                                    daemon=True)
        process.start()
        theirs.close()
        return _Worker(index, process, ours, log)

    # -- the queue -------------------------------------------------------------

    def submit(self, task: dict, timeout: Optional[float] = None, first: bool = False) -> None:
        item = (task, timeout or self.timeout)
        self._queue.appendleft(item) if first else self._queue.append(item)

    @property
    def pending(self) -> int:
        return len(self._queue)

    @property
    def busy(self) -> int:
        return sum(w.task is not None for w in self.workers)

    def idle_workers(self) -> int:
        return sum(w.ready and w.task is None for w in self.workers)

    def _dispatch(self) -> None:
        for w in self.workers:
            if self._queue and w.ready and w.task is None:
                task, timeout = self._queue.popleft()
                w.task, w.started, w.deadline = task, time.time(), time.time() + timeout
                w.conn.send(task)

    # -- results ---------------------------------------------------------------

    def results(self, wait_s: float = 0.5) -> list[tuple[dict, Any]]:
        """Finished tasks as (task, result); a result is the handler's value,
        a ``Lost``, or an ("error", traceback) pair for a handler exception."""
        self._dispatch()
        out: list[tuple[dict, Any]] = []
        handles = {w.conn: w for w in self.workers}
        handles.update({w.process.sentinel: w for w in self.workers})
        for ready in wait(list(handles), timeout=wait_s):
            w = handles[ready]
            if ready is w.conn:
                self._receive(w, out)
        for i, w in enumerate(self.workers):
            if not w.process.is_alive():
                self._drain(w, out)
                self._replace(i, w, out, self._died(w))
            elif w.task is not None and time.time() > w.deadline:
                self._stack(w)
                self._replace(i, w, out, Lost("hang", f"no result after {w.deadline - w.started:.0f} s"))
            elif w.task is not None and (rss := _rss_mb(w.process.pid)) > self.memory_mb:
                self._replace(i, w, out, Lost("memory", f"resident memory {rss:.0f} MB over the {self.memory_mb:.0f} MB limit"))
        self._dispatch()
        return out

    def _receive(self, w: _Worker, out: list) -> bool:
        """One message from ``w``; False once its pipe is closed."""
        try:
            kind, value = w.conn.recv()
        except (EOFError, OSError):
            w.process.join(5)  # the process is dying (faulthandler may still be writing)
            return False
        if kind == "ready":
            w.ready, self._failed_starts = True, 0
        elif kind == "init_error":
            raise PoolError(f"workers cannot start: {value.strip().splitlines()[-1]}\n{value}")
        else:
            task, w.task = w.task, None
            out.append((task, ("error", value) if kind == "error" else value))
            if kind == "retire":
                w.ready, w.retiring = False, True
        return True

    def _drain(self, w: _Worker, out: list) -> None:
        """Read what a dead worker sent before dying."""
        try:
            while w.conn.poll() and self._receive(w, out):
                pass
        except (EOFError, OSError):
            pass

    def _died(self, w: _Worker) -> Lost:
        code = w.process.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            return Lost("stopped" if -code in STOPPING else "signal", name)
        return Lost("exit", f"exit status {code}")

    def _replace(self, i: int, w: _Worker, out: list, lost: Lost) -> None:
        task = w.task
        self._kill(w)
        lost.log_tail = _tail(w.log)
        if task is not None:
            self.lost[lost.kind] += 1
            out.append((task, lost))
        elif not w.ready and not w.retiring:
            self._failed_starts += 1
            if self._failed_starts >= 3:
                raise PoolError(f"workers keep dying while starting ({lost.kind}: {lost.detail}):\n{lost.log_tail}")
        self.workers[i] = self._start(w.index)

    @staticmethod
    def _stack(w: _Worker) -> None:
        """Have a hung worker print where it is stuck, into its log."""
        try:
            os.kill(w.process.pid, signal.SIGUSR1)
            time.sleep(0.5)
        except ProcessLookupError:
            pass

    @staticmethod
    def _kill(w: _Worker) -> None:
        try:
            os.killpg(w.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        w.process.join(5)
        w.conn.close()

    def close(self, now: bool = False) -> None:
        """Stop every worker: politely (finish the current task) or ``now``."""
        for w in self.workers:
            if not now and w.task is None and w.process.is_alive():
                try:
                    w.conn.send(None)
                    w.process.join(10)
                except OSError:
                    pass
            if w.process.is_alive() or now:
                self._kill(w)
        self.workers = []
