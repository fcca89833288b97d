"""Known issues must not mask the rest of the space, nor claim what they do not explain.

A run that meets a known issue is run again without each of the issue's
triggers (reports.triggers) that the run has:

- a known *crash* stopped every oracle behind it: the run without the trigger
  is judged by all of them (the main run, the door run, the replay), so one
  recorded crash hides no other bug;
- a known *wrong value* claims a signature by the program's features: the run
  without the trigger is judged by the oracle that failed, and a failure that
  survives there is not the known issue's (triage names it ``unexplained``
  where it still matches the issue: reports.triggers.claimed).
"""

from __future__ import annotations

from typing import Iterable, Optional

from generators.ir import Program
from harness.outcome import RunConfig

from .known_issues import KnownIssue
from .triggers import present, removed

# Triage names a wrong value's culprit by running without the pass already:
# a known wrong value needs no second run without it.
NAMED_BY_TRIAGE = frozenset({"dedup"})


def unmasked_runs(program: Program, config: RunConfig, known: Iterable[tuple[KnownIssue, str, bool]],
                  oracles: tuple[str, ...]) -> list[tuple[str, Program, RunConfig, tuple[str, ...]]]:
    """(trigger, program, config, oracles to judge) for each trigger of the
    known issues a run met (``known``: issue, the oracle that met it, whether
    as a crash) that the run has: every oracle where a crash stopped them, the
    failing ones where a wrong value is claimed."""
    wanted: dict[str, Optional[set]] = {}
    for issue, oracle, crash in known:
        for trigger in issue.triggers:
            if crash:
                wanted[trigger] = None
            elif trigger not in NAMED_BY_TRIAGE and wanted.get(trigger, set()) is not None:
                wanted.setdefault(trigger, set()).add(oracle)
    out = []
    for trigger, names in wanted.items():
        if not present(trigger, program, config):
            continue
        p, c = removed(trigger, program, config)
        judged = tuple(oracles) if names is None else tuple(o for o in oracles if o in names)
        if p is not None and judged:
            out.append((trigger, p, c, judged))
    return out
