"""Hygiene oracle: compiling and running a program leaves the process's
dispatch state as it was. A leak poisons every later program in the process,
so it is a finding of its own, pinned on the program that caused it."""

from __future__ import annotations

import re

from harness.outcome import Outcome

from .verdict import Status, Verdict

NAME = "hygiene"


def label(leaks: list[str]) -> str:
    """What leaked, as a stable signature detail: dispatch key or mode names."""
    names = sorted({w for leak in leaks for w in re.findall(r"key (\w+)|'(\w+)'", leak) for w in w if w})
    return "leak:" + ",".join(names)


def check(outcome: Outcome) -> Verdict:
    leaks = outcome.capture.leaked_state
    if leaks:
        return Verdict(NAME, Status.FAIL, kind="leaked_state", where="process",
                       message="; ".join(leaks), details={"leaks": leaks, "label": label(leaks)})
    return Verdict(NAME, Status.PASS, message="no dispatch state left behind")
