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


def load_source(source: str) -> ModuleType:
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    name = f"gp_{digest}"
    path = program_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect.getsource and Dynamo's source lookups need it
    spec.loader.exec_module(module)
    return module
