"""Swarm draws: a batch of programs drawn with a random subset of the
generator's features switched off (Groce et al., "Swarm testing"; Hypothesis's
feature flags). One fixed distribution spreads every draw over all features
at once, so two rare ones rarely meet; a swarm configuration that leaves out
most op categories or loop shapes gives the rest room, and one that turns the
edge kinds or ``nested_compile_region`` on for every draw raises them from
rare to common. A configuration is a plain value, drawn from a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .ir import FLOWS, STRUCTURES, BLOCK_KINDS
from .ops import OPS, UNDRAWN

# Op categories a plain draw takes from (strategies.programs' default).
DRAWN_CATEGORIES = tuple(dict.fromkeys(op.category for op in OPS.values()
                                       if op.category not in UNDRAWN))
# Parts of a draw a configuration can switch off, each on its own.
PARTS = ("hierarchy", "contexts", "interludes", "writes", "retypes", "forms", "sections:2", "args", "spellings")
# Features a configuration can switch on for every program of its batch
# (compile_region: the layer block and every sub-block marked nested_compile_region).
BOOSTS = ("edges", "compile_region", "attrs")


def flags() -> list[str]:
    """Every feature flag a configuration can switch off: the vocabulary of
    the campaign's "swarm features paid" table."""
    return ([f"op:{c}" for c in DRAWN_CATEGORIES] + [f"structure:{s}" for s in STRUCTURES]
            + [f"flow:{f}" for f in FLOWS] + [f"kind:{k}" for k in BLOCK_KINDS] + [f"part:{p}" for p in PARTS])


@dataclass(frozen=True)
class Swarm:
    off: tuple[str, ...] = ()  # flags() switched off, sorted
    on: tuple[str, ...] = ()  # BOOSTS switched on, sorted

    def allows(self, flag: str) -> bool:
        return flag not in self.off

    def boosts(self, boost: str) -> bool:
        return boost in self.on

    def keep(self, prefix: str, names) -> tuple:
        """The names of one family the configuration keeps; all of them when
        it would keep none (a draw needs one loop shape, one flow, ...)."""
        kept = tuple(n for n in names if self.allows(f"{prefix}:{n}"))
        return kept or tuple(names)

    def to_dict(self) -> dict:
        return {"off": list(self.off), "on": list(self.on)}

    @staticmethod
    def from_dict(d: dict) -> "Swarm":
        known = set(flags())
        off = tuple(sorted(f for f in d.get("off", ()) if f in known))
        return Swarm(off, tuple(sorted(b for b in d.get("on", ()) if b in BOOSTS)))


NONE = Swarm()


def draw_swarm(rng: random.Random) -> Swarm:
    """A configuration: every flag off with even odds (a family keeps one
    member at least, by ``Swarm.keep``), every boost on with odds of one in three."""
    off = tuple(sorted(f for f in flags() if rng.random() < 0.5))
    on = tuple(sorted(b for b in BOOSTS if rng.random() < 1 / 3))
    return Swarm(off, on)
