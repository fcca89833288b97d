"""The oracle catalogue: adding an oracle is one entry."""

from __future__ import annotations

from typing import Callable

from harness.outcome import Outcome

from . import differential, hygiene
from .verdict import Verdict

ORACLES: dict[str, Callable[[Outcome], Verdict]] = {
    differential.NAME: differential.check,
    hygiene.NAME: hygiene.check,
}


def judge(outcome: Outcome, names: tuple[str, ...] | None = None) -> list[Verdict]:
    return [ORACLES[n](outcome) for n in (names or tuple(ORACLES))]
