"""A campaign worker's first steps, before torch is imported: coverage must
start first, or every line torch runs at import time (each ``def``, each class
body) of the measured files would count as never reached."""

from __future__ import annotations

from typing import Any, Optional

from harness.branches import site_root  # stdlib only: torch stays unimported
from harness.warm import forkserver  # stdlib only too

# The torch files whose coverage a campaign measures (--coverage).
COVERED = ("torch/_dynamo/graph_region_tracker.py", "torch/_dynamo/graph_deduplication.py",
           "torch/_dynamo/graph_utils.py", "torch/_higher_order_ops/invoke_subgraph.py")

# What the workers' forkserver imports once for all of them (harness.warm.forkserver): torch, and
# the floors the worker stands on (campaigns.worker itself would name this module's importer); without
# --coverage, which must start before torch is imported (then each is spawned).
WORKER_PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "oracles.registry", "reports.triage",
                  "reports.repro", "harness.doors")


def worker_preload(coverage: bool) -> Optional[tuple[str, ...]]:
    """What the workers' forkserver preloads; None under --coverage (each worker spawned)."""
    return None if coverage else WORKER_PRELOAD


def start_worker_server(coverage: bool) -> None:
    """Start the workers' forkserver now, importing torch while the caller
    goes on (a no-op under --coverage, or once it runs)."""
    preload = worker_preload(coverage)
    if preload is not None:
        forkserver(preload)

_coverage: Any = None


def covered_paths() -> list[str]:
    return [str(site_root() / f) for f in COVERED]


def init(options: dict) -> None:
    """The pool's first init step; ``campaigns.worker:init`` (which imports
    torch, now measured) is the next one."""
    global _coverage
    if options.get("coverage"):
        import coverage

        # with --feedback too, its watched files are traced by this one tracer (two would pause each other)
        _coverage = coverage.Coverage(data_file=options["coverage"], data_suffix=True, branch=True,
                                      include=covered_paths() + list(options.get("feedback") or []))
        _coverage.start()


def save_coverage() -> None:
    if _coverage is not None:
        _coverage.save()


def running_coverage() -> Any:
    """The worker's --coverage measurement, if it runs (None otherwise)."""
    return _coverage
