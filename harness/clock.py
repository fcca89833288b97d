"""Where a worker's seconds go: inside torch running the program (eager
runs, compiles, compiled calls) or in the harness around it (recorders,
copies, guard questions, comparisons, triage's bookkeeping). Only the
outermost ``in_torch`` counts; torch work the harness asks for on its own
account (a recorder running graphs) is marked ``in_harness`` and counts
as the harness's.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator

_depth = 0  # in_torch nesting
_held = 0  # in_harness nesting: in_torch counts nothing while held
_start = 0.0
_total = 0.0


def torch_seconds() -> float:
    """Seconds counted inside torch so far in this process (a running span included)."""
    return _total + (time.perf_counter() - _start if _depth and not _held else 0.0)


@contextlib.contextmanager
def in_torch() -> Iterator[None]:
    global _depth, _start, _total
    if _held:
        yield
        return
    if _depth == 0:
        _start = time.perf_counter()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            _total += time.perf_counter() - _start


@contextlib.contextmanager
def in_harness() -> Iterator[None]:
    """Harness work, though called from inside torch (a compile's callback)."""
    global _held, _start, _total
    if _depth and not _held:
        _total += time.perf_counter() - _start
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if _depth and not _held:
            _start = time.perf_counter()
