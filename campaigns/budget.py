"""How long one invocation of a campaign may run.

A job on a cluster is started, preempted, requeued and started again with
the same command line; the campaign's ``--budget`` and ``--programs`` are
the campaign's, not each invocation's, under ``--resume auto``, and no
invocation runs past ``--until``. Decided before torch is imported, so a
requeue past the end exits at once.
"""

from __future__ import annotations

import time
from typing import Optional

from reports.ledger import LOG, Ledger


class NotStarted(Exception):
    """Nothing to run: the deadline has passed, or a resumed campaign has spent its budget or program count
    (a requeue after the end). Not an error: one line, exit 0, nothing written."""


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def plan(out, budget: float, programs: int, resume, until: Optional[float]) -> tuple[float, int]:
    """Seconds this invocation may run and the programs already done: the
    whole budget for a fresh campaign or a plain ``--resume`` (another
    budget); for ``--resume auto`` what earlier invocations left of it;
    never past ``--until``. Reads the folder, writes nothing."""
    now = time.time()
    if until is not None and until <= now:
        raise NotStarted(f"campaign not started: --until {_when(until)} has passed (now {_when(now)})")
    spent, done = 0.0, 0
    if resume == "auto" and (out / LOG).exists():
        ledger = Ledger.load(out)
        spent, done = ledger.active, len(ledger.done)
        if spent >= budget:
            raise NotStarted(f"campaign not started: {out} has run its --budget ({spent:.0f} of "
                             f"{budget:.0f} s); a larger --budget goes on")
        if programs and done >= programs:
            raise NotStarted(f"campaign not started: {out} has run its {programs} programs")
    left = budget - spent
    return (min(left, until - now) if until is not None else left), done
