"""A campaign that steers itself (``--feedback``): what the next program is.

Every program is one of: a plain draw (``campaigns.campaign.draw``), a swarm
draw (a batch drawn with a random subset of the generator's features off,
``generators.swarm``), or a mutant of a corpus program by one of the IR's
mutation operators (``generators.mutate``). Which of these comes next is a
multi-armed bandit over those sources (one arm per operator): an arm is
drawn with odds in proportion to the reward per worker-second its programs
earned lately (a program's reward is log2(1 + its new edges): the first
programs of a campaign reach thousands of common arcs each, which must not
decide the rest of it). The draw is in two steps, a family (plain draw, swarm
draw, mutant) and then an operator, each with floors: mutants get half the
programs at least once there is a corpus, as in AFL, where mutation is most
of the work (discounted sums, so what paid an hour ago does not
decide now), with a floor for every arm so none is starved for good. The
feedback edges come from the workers (``harness.branches``: arcs of torch's
capture stack; ``harness.run_edges`` and the worker: guard kinds, changed
calls, region groups, verdicts, findings); a program that reached one no
earlier program had joins the corpus.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from generators.ir import Program
from generators.mutate import OPERATORS, mutate

from .corpus import Corpus, Entry

DRAW, SWARM, MUTATE = "draw", "swarm", "mutate"
UNTRIGGER = "untrigger"  # generators.mutate: one feature a known issue needs taken away
DISCOUNT = 0.97  # an arm's sums shrink by this at each of its results
FLOOR = 0.03  # every operator's least share of the mutants
# Each family's least share of the programs once the corpus holds one: mutants
# get at least half (a plain draw's thousands of common arcs early on must not
# starve them), fresh draws a tenth each.
FAMILY_FLOORS = {DRAW: 0.1, SWARM: 0.1, MUTATE: 0.5}
PRIOR_REWARD, PRIOR_SECONDS = 4.0, 10.0  # an arm's sums start here: untried arms look promising
HAVOC = 0.5  # odds that a mutant gets one more random operator on top (havoc), again and again
HAVOC_MAX = 3  # at most this many operators on top of the arm's own
TRIES = 8  # parents tried for one mutant before the arm yields a draw instead
RESCAN_SECONDS = 30.0  # how often other shards' corpus folders are read again


@dataclass
class Arm:
    reward: float = PRIOR_REWARD
    seconds: float = PRIOR_SECONDS
    programs: int = 0

    @property
    def rate(self) -> float:
        return self.reward / self.seconds

    def paid(self, edges: int, seconds: float) -> None:
        self.reward = self.reward * DISCOUNT + math.log2(1 + edges)
        self.seconds = self.seconds * DISCOUNT + max(seconds, 0.05)
        self.programs += 1


@dataclass
class Steering:
    seed: int
    shard: tuple[int, int]
    corpus: Corpus
    plain: Iterator[tuple[str, Program]]
    swarm: Iterator[tuple[str, Program, dict]]
    shared: tuple[Path, ...] = ()  # other shards' corpus folders
    steer: bool = True  # False: every program a plain draw, its edges only counted (an A/B's other side)
    edges: set = field(default_factory=set)  # every edge reached so far (this campaign, its corpus, shared ones)
    arms: dict = field(default_factory=dict)
    mutants: int = 0  # mutant ids are <seed>-m<shard>.<n>
    seen: set = field(default_factory=set)  # programs run (as JSON): a mutant never repeats one
    rng: random.Random = field(default_factory=random.Random)
    _scanned: float = 0.0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed * 7919 + self.shard[0])
        for name in (DRAW, SWARM, *(f"{MUTATE}:{op}" for op in OPERATORS)):
            self.arms.setdefault(name, Arm())
        self.edges |= self.corpus.edges()
        self.rescan(force=True)

    def resume_from(self, done: set) -> None:
        """Mutant numbers go on after the ones an earlier invocation ran."""
        prefix = f"{self.seed}-m{self.shard[0]}."
        numbers = [int(p[len(prefix):]) for p in done if isinstance(p, str) and p.startswith(prefix)
                   and p[len(prefix):].isdigit()]
        self.mutants = max(numbers, default=-1) + 1

    def rescan(self, force: bool = False) -> None:
        if not self.shared or (not force and time.time() - self._scanned < RESCAN_SECONDS):
            return
        self._scanned = time.time()
        for folder in self.shared:
            for entry in self.corpus.load(folder):
                self.edges |= set(entry.edges)

    # -- choosing ----------------------------------------------------------------

    def _pick(self, rates: dict[str, float], floors: dict[str, float]) -> str:
        """Each name gets its floor, and the rest of the odds in proportion to its rate."""
        floor = {n: floors.get(n, 0.0) for n in rates}
        rest = max(0.0, 1.0 - sum(floor.values()))
        total = sum(rates.values()) or 1.0
        shares = {n: floor[n] + rest * r / total for n, r in rates.items()}
        return self.rng.choices(list(shares), weights=list(shares.values()))[0]

    def _arm(self) -> str:
        """Two draws: a family (a plain draw, a swarm draw, a mutant), then,
        for a mutant, its operator; each by its rate, above its floor."""
        if not self.steer:
            return DRAW
        operators = {n: a for n, a in self.arms.items() if n.startswith(MUTATE)}
        families = {DRAW: self.arms[DRAW].rate, SWARM: self.arms[SWARM].rate}
        if self.corpus.entries:
            families[MUTATE] = sum(a.reward for a in operators.values()) / sum(a.seconds for a in operators.values())
        family = self._pick(families, FAMILY_FLOORS)
        if family != MUTATE:
            return family
        return self._pick({n: a.rate for n, a in operators.items()}, {n: FLOOR for n in operators})

    def next(self) -> tuple[str, Program, dict]:
        """The next program to run: (id, program, origin)."""
        self.rescan()
        arm = self._arm()
        if arm.startswith(MUTATE):
            made = self._mutant(arm.split(":", 1)[1])
            if made is not None:
                return made
            arm = DRAW  # no parent took the operator: a plain draw instead
        if arm == SWARM:
            pid, program, config = next(self.swarm)
            self.seen.add(program.to_json())
            return pid, program, {"source": SWARM, "arm": SWARM, "swarm": config}
        pid, program = next(self.plain)
        self.seen.add(program.to_json())
        return pid, program, {"source": DRAW, "arm": DRAW}

    def _parent(self) -> Entry:
        entries = list(self.corpus.entries.values())
        return self.rng.choices(entries, weights=[e.weight for e in entries])[0]

    def _mutant(self, operator: str) -> Optional[tuple[str, Program, dict]]:
        for _ in range(TRIES):
            parent = self._parent()
            other = self._parent() if operator == "splice" else None
            base, ops = parent.program, [operator]
            if parent.known_crash:  # a parent that met a recorded crash: its descendants lose a trigger first
                base = mutate(parent.program, UNTRIGGER, self.rng)
                if base is None:
                    continue
                ops = [UNTRIGGER, operator]
            mutant = mutate(base, operator, self.rng, other.program if other else None)
            while mutant is not None and len(ops) <= HAVOC_MAX and self.rng.random() < HAVOC:
                extra = self.rng.choice([o for o in OPERATORS if o != "splice"])
                again = mutate(mutant, extra, self.rng)
                if again is not None:
                    mutant, ops = again, [*ops, extra]
            if mutant is None or mutant.to_json() in self.seen:
                continue
            self.seen.add(mutant.to_json())
            parent.picks += 1
            pid = f"{self.seed}-m{self.shard[0]}.{self.mutants}"
            self.mutants += 1
            origin = {"source": MUTATE, "arm": f"{MUTATE}:{operator}", "operators": ops, "parent": parent.id}
            if other is not None:
                origin["other"] = other.id
            return pid, mutant, origin
        return None

    # -- learning ----------------------------------------------------------------

    def observe(self, pid: str, program: Program, origin: dict, reached: list[str], seconds: float,
                deduplicated: bool = False, known_crash: bool = False) -> list[str]:
        """A program's result: the edges it reached that no program had
        reached before (it joins the corpus if there are any); its arm and
        its parent are paid by them. ``deduplicated``: the pass made
        invoke_subgraph calls of it (such parents are picked more).
        ``known_crash``: its run met a recorded crash first: a reward of a
        known bug's doing pays nobody, and it joins the corpus as a parent
        whose mutants lose a trigger first (``untrigger``)."""
        new = sorted(set(reached) - self.edges)
        self.edges |= set(new)
        arm = self.arms.get(origin.get("arm", DRAW))
        if arm is not None:
            arm.paid(0 if known_crash else len(new), seconds)
        parent = self.corpus.entries.get(origin.get("parent", ""))
        if parent is not None and new and not known_crash:
            parent.paid += 1
        if new:
            self.corpus.add(pid, program, origin, new, deduplicated, known_crash)
        return new

    def arms_summary(self) -> dict:
        return {n: {"programs": a.programs, "rate": round(a.rate, 3)} for n, a in self.arms.items() if a.programs}
