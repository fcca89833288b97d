"""Which branches of torch's capture stack a program took: the campaign's
feedback signal (``--feedback``).

A ``Tracer`` records arcs (line -> line transitions, coverage.py's branch
measurement with its C tracer) in a list of watched torch files while the
program's main capture runs (``harness.pipeline`` enters ``traced()`` around
it: the first compile, its call, its changed calls and their recompiles).
The oracles' extra compiles (dedup off, a second capture) run the same code
paths again and are not traced: tracing them cost as much again for a few
percent more arcs. Dynamo's own counters after the capture (graph-break
reasons, stats, unimplemented features) are edges too. Each edge is a short
string, so a campaign can say which file or counter paid.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
from pathlib import Path
from typing import Iterator, Optional

# The capture stack, as globs relative to site-packages: Dynamo's guards and
# variable trackers, the output graph, the region tracker, the pass and its
# graph utilities, invoke_subgraph and the higher-order-op utilities
# AOTAutograd uses to trace subgraphs; and torch/autograd/graph.py, whose hooks,
# saved-tensor hooks and gradient edges the autograd features reach (generators.autograd).
WATCHED = ("torch/_dynamo/guards.py", "torch/_dynamo/variables/*.py", "torch/_dynamo/output_graph.py",
           "torch/_dynamo/side_effects.py", "torch/_dynamo/graph_region_tracker.py",
           "torch/_dynamo/graph_deduplication.py", "torch/_dynamo/graph_utils.py",
           "torch/_higher_order_ops/invoke_subgraph.py", "torch/_higher_order_ops/utils.py",
           "torch/autograd/graph.py")
COUNTER_GROUPS = ("graph_break", "unimplemented", "stats", "aot_autograd", "inline_call")
REASON_CHARS = 60  # a graph-break reason is cut to this many characters (its values vary)


class WatchError(ValueError):
    """A watched-file pattern that matches nothing in the installed torch."""


def site_root() -> Path:
    """The folder torch is installed in (site-packages), without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise WatchError("torch is not installed")
    return Path(list(spec.submodule_search_locations)[0]).parent


def watched_files(patterns: tuple[str, ...] = WATCHED) -> list[str]:
    """The files the patterns name in the installed torch; a pattern that
    names none is an error (a typo, or a file this torch does not have)."""
    root = site_root()
    files: list[str] = []
    for pattern in patterns:
        found = sorted(glob.glob(str(root / pattern)))
        if not found:
            raise WatchError(f"watched-file pattern {pattern!r} matches nothing in {root}")
        files += [f for f in found if f not in files]
    return files


def short(path: str) -> str:
    return path.split("site-packages/")[-1]


class Tracer:
    """Arcs in the watched files while ``traced()`` is entered, as edges
    ``<file>:<from>><to>``; ``take()`` returns those not taken before."""

    def __init__(self, files: list[str], running=None):
        """``running``: a coverage.Coverage already measuring these files
        the whole time (a campaign's --coverage); its arcs are read instead
        of starting a second tracer, which would pause the first."""
        import coverage

        self.files = files
        self._always = running is not None
        self._cov = running or coverage.Coverage(branch=True, include=files, data_file=None)
        self._arcs: dict[str, set] = {}  # per file, the arcs taken before
        self._seen: set[str] = set()  # counter edges taken before
        self._counters: set[str] = set()
        self._shorts = {os.path.realpath(f): short(f) for f in files}
        self._real: dict[str, str] = {}  # path as coverage names it -> real path

    @contextlib.contextmanager
    def traced(self) -> Iterator[None]:
        if not self._always:
            self._cov.start()
        try:
            yield
        finally:
            if not self._always:
                self._cov.stop()
            self._counters |= counter_edges()

    def take(self) -> set[str]:
        """Edges reached since the last ``take`` that this tracer had not reached before."""
        data = getattr(getattr(self._cov, "_collector", None), "data", None) or {}
        new: set[str] = set()
        for path, arcs in data.items():
            real = self._real.setdefault(path, os.path.realpath(path))
            if real not in self._shorts:  # a file --coverage measures but feedback does not watch
                continue
            fresh = set(arcs) - self._arcs.setdefault(path, set())
            self._arcs[path] |= fresh
            name = self._shorts[real]
            new |= {f"{name}:{a}>{b}" for a, b in map(_arc, fresh) if a > 0 and b > 0}  # entries, exits: negative
        new |= self._counters - self._seen
        self._seen |= self._counters
        self._counters = set()
        return new


def _arc(arc) -> tuple[int, int]:
    """An arc as coverage's C tracer stores it: a (from, to) pair, or both
    packed in one int (coverage's collector unpacks them the same way)."""
    if not isinstance(arc, int):
        return arc
    a, b = arc & 0xFFFFFFF, (arc >> 28) & 0xFFFFFFF
    return (-a if arc & (1 << 56) else a), (-b if arc & (1 << 57) else b)


def counter_edges() -> set[str]:
    """Dynamo's counters the capture bumped, as edges (graph-break reasons
    cut short: their values differ from program to program)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return set()
    out = set()
    for group in COUNTER_GROUPS:
        for key, n in counters.get(group, {}).items():
            if n:
                out.add(f"counter:{group}:{str(key).splitlines()[0][:REASON_CHARS]}")
    return out


_tracer: Optional[Tracer] = None


def install(tracer: Optional[Tracer]) -> None:
    """Make ``tracer`` the one ``traced()`` enters (None: tracing off)."""
    global _tracer
    _tracer = tracer


_on = True  # whether this program's capture is traced (a campaign traces a share: set_traced)


def set_traced(on: bool) -> None:
    global _on
    _on = on


def traced():
    """The installed tracer's context, or nothing when feedback is off or
    this program is not in the traced share."""
    return _tracer.traced() if _tracer is not None and _on else contextlib.nullcontext()


def take() -> set[str]:
    return _tracer.take() if _tracer is not None else set()
