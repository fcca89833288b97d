"""Write generated source to a real file and import it.

Dynamo and the region tracker key on ``co_filename`` and line numbers, so the
program must come from a file on disk, not from ``exec`` of a string.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from collections import deque
from pathlib import Path
from types import ModuleType


ENV = "DEDUP_HARNESS_PROGRAMS"


def own_program_dir() -> Path:
    """The folder every program of this run is written to, made now (in the environment, so the processes
    this one starts write there too) and removed when this process exits: a run leaves nothing behind. A
    folder named by the environment already belongs to a run that started this one."""
    if not os.environ.get(ENV):
        root = tempfile.mkdtemp(prefix="dedup-harness-programs-")
        os.environ[ENV] = root
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(root, ignore_errors=True))
    return Path(os.environ[ENV])


def program_dir() -> Path:
    path = own_program_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


# Loads of one source so far in this process, and the names of the latest loads (oldest first).
_LOADS: dict[str, int] = {}
_LIVE: deque = deque()
KEPT = 256  # module names kept in sys.modules: a program's runs load its source a few times, never this many


def load_source(source: str) -> ModuleType:
    """A fresh module of ``source`` (its file named by its digest), under a name no earlier load in this process
    had: code of an earlier load may still run (a compiled frame, the program's autograd trace list), and
    Dynamo resolves a module's globals in its guards through ``sys.modules`` by the module's name, so a second
    load under the first one's name made the first one's guards read the second one's globals (a stale entry
    served: a harness-made wrong value)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = program_dir() / f"gp_{digest}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    k = _LOADS.get(digest, 0)
    _LOADS[digest] = k + 1
    # 16 hex digits either way: a signature reads any of them as one ID (reports.signature)
    name = f"gp_{digest}" if k == 0 else f"gp_{hashlib.sha256(f'{digest}#{k}'.encode()).hexdigest()[:16]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect.getsource and Dynamo's source lookups need it
    _LIVE.append(name)
    while len(_LIVE) > KEPT:
        sys.modules.pop(_LIVE.popleft(), None)
    spec.loader.exec_module(module)
    return module
