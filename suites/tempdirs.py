"""A temporary directory a run under test uses as its TMPDIR, and what is left in it afterwards: how the suites
check that scripts and campaigns leave nothing behind (``test_leaves_nothing.py``, the gate's campaign test,
the minimal repros' nightly run)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile

from harness.loader import ENV

TORCH_CACHES = re.compile(r"^(torchinductor_\w+|triton|proxy-cache-\w+)$")


@contextlib.contextmanager
def fresh_tmp():
    """An empty temporary directory for a run to use as its TMPDIR, on a short path (a worker server's socket
    lives there, and a socket path is at most 107 bytes), removed afterwards."""
    tmp = tempfile.mkdtemp(prefix="ln-")
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def left(tmp) -> list[str]:
    return sorted(n for n in os.listdir(tmp) if not TORCH_CACHES.match(n))


def env(tmp) -> dict:
    base = {k: v for k, v in os.environ.items() if k != ENV}  # the run makes its own, as a user's would
    return {**base, "TMPDIR": str(tmp)}
