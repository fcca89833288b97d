"""``python ARGS`` with torch already imported: a repro or a command line run
in a process of its own, forked from an interpreter that imported torch once.

A repro is verified as a user runs it, in a fresh process; importing torch
and Dynamo takes that process 2-3 s before its first line of its own, more
than most repros then take. A *zygote* (a ``python -c`` that imports
``PRELOAD`` and waits) forks one child per run instead: the child gets the
script's ``sys.argv``, ``sys.path[0]``, working folder, environment and
standard streams, runs it as ``__main__`` and exits as Python would (the
status of ``SystemExit``, 1 after ``sys.excepthook`` for an exception, the
signal that killed it). It is its own session, so a timeout kills what it
started too.

What a fork cannot give is a fresh import: a run whose environment differs
from the zygote's in a variable torch reads at import (``IMPORT_TIME``), a
run of another interpreter, or ``DEDUP_HARNESS_COLD=1`` runs cold, through
``subprocess`` as before.

Functions (a campaign's workers, the backend probe) run in processes forked
from multiprocessing's forkserver with ``PRELOAD`` (and what the caller adds)
imported: ``forkserver`` starts it, ``forked_context`` hands it out where it
imported what a fresh process would.
"""

from __future__ import annotations

import atexit
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional, Sequence

# torch, Dynamo, and what a first compile imports (AOTAutograd, the partitioner, inductor's compile_fx): 0.9 s
# of a fresh process's first torch.compile
PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx")
# Environment variables read at import time by torch, its libraries or Python:
# a run that sets one differently gets a cold process.
IMPORT_TIME = ("TORCH", "PYTORCH", "CUDA", "NVIDIA", "OMP_", "MKL", "KMP_", "GOMP", "LD_", "PYTHON", "MALLOC")
# ... but for PYTHONPATH, whose entries a child puts on its sys.path as Python would.
EMULATED = ("PYTHONPATH",)
COLD = "DEDUP_HARNESS_COLD"

# The zygote: imports PRELOAD, then per request line forks a child, answers
# {"pid"} at once and {"status"} once the child is gone. Requests and answers
# travel on the pipes it was started with; a child's streams are files.
_MAIN = r'''
import json, os, sys
del sys.path[0]  # -c's "": each run puts its own first entry
ours = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
base = [p for p in sys.path if p not in ours]  # what a run's PYTHONPATH goes in front of
for name in json.loads(sys.argv[1]):
    try:
        __import__(name)
    except Exception:
        pass
proto = os.fdopen(os.dup(1), "w", buffering=1)
devnull = os.open(os.devnull, os.O_RDWR)
os.dup2(devnull, 1)

def child(req):
    code = 1
    try:
        os.setsid()
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.dup2(os.open(req["stdin"] or os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(req["stdout"], os.O_WRONLY | os.O_TRUNC), 1)
        os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_TRUNC), 2)
        import random
        import tempfile
        tempfile.tempdir = None  # read TMPDIR afresh, as a fresh process does
        random.seed()  # a fresh process draws afresh
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        import runpy
        args = req["args"]
        theirs = [os.path.abspath(p) for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = theirs + base
        try:
            if args[0] == "-m":
                sys.argv = [args[1], *args[2:]]
                sys.path.insert(0, os.getcwd())
                runpy.run_module(args[1], run_name="__main__", alter_sys=True)
            elif args[0] == "-c":
                sys.argv = ["-c", *args[2:]]
                sys.path.insert(0, "")
                import types
                main = sys.modules["__main__"] = types.ModuleType("__main__")
                exec(compile(args[1], "<string>", "exec"), main.__dict__)
            else:
                script = os.path.abspath(args[0])
                sys.argv = [args[0], *args[1:]]
                sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
                runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        import atexit
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF)

def poisoned():
    """Whether a child forked now could not use CUDA: a preload that asked the driver anything (a device
    count) poisons fork on a CUDA build, and every run would then fail as no fresh process does."""
    torch = sys.modules.get("torch")
    if torch is None or not (torch.version.cuda or torch.version.hip):
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 1

proto.write("poisoned\n" if poisoned() else "ready\n")
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(req)
    proto.write(json.dumps({"pid": pid}) + "\n")
    _, status = os.waitpid(pid, 0)
    proto.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
'''


def same_at_import(env: dict, other: dict, emulated: tuple[str, ...] = EMULATED) -> bool:
    """Whether a process started with ``other`` imported torch as one started with ``env`` would."""
    keys = set(env) | set(other)
    return all(env.get(k) == other.get(k) or _derived(k, env.get(k), other.get(k))
               for k in keys if k.startswith(IMPORT_TIME) and k not in emulated)


def _derived(key: str, a: Optional[str], b: Optional[str]) -> bool:
    """Whether one side lacks ``key`` where the other holds the value torch sets there itself, when first it
    needs one it was not given: inductor's cache directory (``cache_dir_utils.cache_dir`` writes its default
    into ``os.environ``). A campaign's process that has asked for it (the probe, a config patch) held one its
    forkserver, started before, lacked, and every worker was spawned cold: 6 s of imports each, on both cores,
    at every campaign's start."""
    if key != "TORCHINDUCTOR_CACHE_DIR" or (a is None) == (b is None):
        return False
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # a torch without it: not known to be the default
        return False
    return os.path.abspath(default_cache_dir()) == os.path.abspath(a or b)


_server_env: Optional[dict] = None  # the environment the forkserver imported torch in


def forkserver(preload: Sequence[str] = PRELOAD):
    """The forkserver context, its server started now (importing ``preload``
    while the caller goes on), unless it runs already; the first call of a
    process decides what it preloads."""
    global _server_env
    from multiprocessing import forkserver as server

    ctx = multiprocessing.get_context("forkserver")
    if _server_env is None:
        ctx.set_forkserver_preload(list(preload))
        server.ensure_running()
        _server_env = dict(os.environ)
    return ctx


def stop_forkserver() -> None:
    """Stop the forkserver this process started, at once: a command that
    fails its checks must not leave it importing torch. (multiprocessing has
    no public way; without these attributes it ends with this process.)"""
    global _server_env
    from multiprocessing import forkserver as server

    state = server._forkserver
    pid = getattr(state, "_forkserver_pid", None)
    if pid is None or not hasattr(state, "_stop"):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    state._stop()
    _server_env = None


def forked_context(preload: Optional[Sequence[str]] = PRELOAD):
    """The forkserver's context where what it imported is what a spawned
    process would import now (no import-time variable changed since it
    started) and its children can use CUDA; else spawn. ``preload`` None: spawn."""
    if preload is not None:
        ctx = forkserver(preload)
        if same_at_import(dict(os.environ), _server_env, emulated=()) and not _server_poisoned(ctx):
            return ctx
    return multiprocessing.get_context("spawn")


_poisoned: dict = {}  # the forkserver's pid -> whether its children could not use CUDA


def _in_bad_fork() -> None:
    import torch

    sys.exit(1 if torch.cuda._is_in_bad_fork() else 0)


def _server_poisoned(ctx) -> bool:
    """Whether the forkserver's children could not use CUDA (its preload asked the driver something, which
    poisons fork on a CUDA build): on a GPU machine every worker then failed every program, CPU ones too, as
    "Cannot re-initialize CUDA in forked subprocess". Asked once per server, and only of a CUDA build."""
    import torch

    if not (torch.version.cuda or torch.version.hip):
        return False
    from multiprocessing import forkserver as server

    key = getattr(server._forkserver, "_forkserver_pid", None)
    if key not in _poisoned:
        child = ctx.Process(target=_in_bad_fork, daemon=True)
        child.start()
        child.join(120)
        _poisoned[key] = child.exitcode != 0
    return _poisoned[key]


class ZygoteError(RuntimeError):
    """The zygote died or could not start: the run goes cold."""


class ForkPoisoned(ZygoteError):
    """The zygote's children could not use CUDA: this process's runs all go cold."""


class Zygote:
    """One warm interpreter; one run at a time (``run`` holds a lock)."""

    def __init__(self, preload: Sequence[str] = PRELOAD, start_timeout: float = 120.0):
        self.env = dict(os.environ)
        self._lock = threading.Lock()
        self._proc = subprocess.Popen([sys.executable, "-c", _MAIN, json.dumps(list(preload))], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, start_new_session=True, env=self.env)
        self._fd, self._pending = self._proc.stdout.fileno(), ""
        answer = self._read(start_timeout)
        if answer != "ready":
            self.close()
            if answer == "poisoned":
                raise ForkPoisoned("its children could not use CUDA (fork poisoned)")
            raise ZygoteError("the zygote did not start")

    def _read(self, timeout: Optional[float]) -> Optional[str]:
        """One answer line; None when none came before ``timeout``. Read from
        the descriptor into a buffer of our own: a run that ends at once sends
        its pid and status lines together, and a buffered file's readline
        would keep the second where select cannot see it (a wait for ever)."""
        while "\n" not in self._pending:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise ZygoteError("the zygote died")
            self._pending += chunk.decode()
        line, self._pending = self._pending.split("\n", 1)
        return line.strip()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def fits(self, env: dict) -> bool:
        """Whether a run with ``env`` is the run a fresh process would make."""
        return same_at_import(env, self.env)

    def run(self, args: Sequence[str], cwd: str, env: dict, timeout: Optional[float],
            stdin: Optional[str] = None) -> tuple[Optional[int], str, str]:
        """(exit status or None on timeout, stdout, stderr) of ``python ARGS``."""
        with self._lock, tempfile.TemporaryDirectory(prefix="warm-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            out.touch()
            err.touch()
            infile = None
            if stdin is not None:
                infile = Path(tmp, "stdin")
                infile.write_text(stdin)
            request = {"args": list(args), "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err),
                       "stdin": str(infile) if infile else None}
            try:
                self._proc.stdin.write(json.dumps(request) + "\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                raise ZygoteError(f"the zygote died: {e}") from None
            pid = json.loads(self._read(60) or "{}").get("pid")
            if pid is None:
                raise ZygoteError("the zygote did not fork")
            answer = self._read(timeout)
            code: Optional[int]
            if answer is None:  # past its deadline: the child's session goes, then its status comes
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                self._read(None)
                code = None
            else:
                code = json.loads(answer)["status"]
            return code, out.read_text(errors="replace"), err.read_text(errors="replace")

    def close(self) -> None:
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()


_zygote: Optional[Zygote] = None
_starting = threading.Lock()
_refused = False  # this process's zygote can never serve (its children could not use CUDA)


def zygote() -> Optional[Zygote]:
    """This process's zygote, started on first use (and again if it died);
    None where it cannot start."""
    global _zygote, _refused
    with _starting:
        if _refused:
            return None
        if _zygote is None or not _zygote.alive():
            try:
                _zygote = Zygote()
            except ForkPoisoned:
                _zygote, _refused = None, True
            except (ZygoteError, OSError):
                _zygote = None
            else:
                atexit.register(_zygote.close)
        return _zygote


def run(args: Sequence[str], cwd: Optional[str] = None, env: Optional[dict] = None, timeout: Optional[float] = None,
        python: str = sys.executable, input: Optional[str] = None) -> subprocess.CompletedProcess:
    """``subprocess.run([python, *args], capture_output=True, text=True)``,
    warm where the run is what a fresh process would do; a timeout raises
    ``subprocess.TimeoutExpired`` as there."""
    env = dict(os.environ if env is None else env)
    cwd = str(cwd or os.getcwd())
    warm = python == sys.executable and not os.environ.get(COLD) and not env.get(COLD)
    z = zygote() if warm else None
    if z is not None and z.fits(env):
        try:
            code, out, err = z.run(args, cwd, env, timeout, input)
        except ZygoteError:
            pass
        else:
            if code is None:
                raise subprocess.TimeoutExpired([python, *args], timeout, out, err)
            return subprocess.CompletedProcess([python, *args], code, out, err)
    return subprocess.run([python, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
                          input=input, start_new_session=True)
