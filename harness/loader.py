"""Write generated source to a real file and import it.

Dynamo and the region tracker key on ``co_filename`` and line numbers, so the
program must come from a file on disk, not from ``exec`` of a string.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def program_dir() -> Path:
    root = os.environ.get("DEDUP_HARNESS_PROGRAMS") or os.path.join(
        tempfile.gettempdir(), f"dedup-harness-{os.getuid()}", "programs"
    )
    path = Path(root)
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
