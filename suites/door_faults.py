"""Finding each door's planted fault (``suites.planted_doors``) the way a
campaign would: draw programs, give each the door, and judge the door run
on the honest pipeline and under the fault. A program the honest door run
does not pass (a real torch bug, a refusal) proves nothing and is passed
over; so is one whose plain compile (no door) the fault also breaks, since
then the door is not what catches it.

``python -m suites.door_faults`` refreshes ``data/planted_doors.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

from hypothesis import HealthCheck, given, seed, settings

from generators.doors import DOORS, fits, with_door
from generators.ir import Program, to_dict
from generators.strategies import programs
from harness.doors import run_door
from harness.outcome import RunConfig
from harness.pipeline import InvalidProgram, run_program
from oracles.registry import DOOR_ORACLES, ORACLES

from .planted_doors import FAULTS

DATA = Path(__file__).parent / "data" / "planted_doors.json"
# The door's faults are about the door, not the pass: judged without
# deduplication (with it, function transforms and HOP regions meet KI-058
# and KI-003 first).
CONFIG = RunConfig(backend="aot_eager", dedup=False)
ORACLE = {"cache:warm": "door_cache"}


def door_verdict(program: Program, fault: Optional[str] = None):
    """The door oracle's verdict on one door run (under ``fault``'s planted fault)."""
    oracle = DOOR_ORACLES[ORACLE.get(program.options.door, "door")]
    if fault is None:
        return oracle(run_door(program, CONFIG))
    with FAULTS[fault]():
        return oracle(run_door(program, CONFIG))


def plain_fails(program: Program, fault: str) -> bool:
    """Whether the plain compile of the program (its door taken away) fails under the fault."""
    with FAULTS[fault]():
        outcome = run_program(with_door(program, ""), RunConfig(backend="aot_eager", dedup=False,
                                                                record_structure=False))
    return ORACLES["differential"](outcome).failed


def catches(program: Program, door: str) -> bool:
    try:
        return door_verdict(program).status.value == "pass" and door_verdict(program, door).failed \
            and not plain_fails(program, door)
    except InvalidProgram:
        return False


def search(door: str, max_examples: int = 30, seeds: range = range(6), budget: float = 300.0) -> Optional[Program]:
    """A drawn program through ``door`` that only the door catches the fault in (None: none found)."""
    started = time.time()
    for s in seeds:
        drawn: list[Program] = []

        def keep(program: Program) -> None:
            drawn.append(program)

        test = settings(max_examples=max_examples, database=None, deadline=None,
                        suppress_health_check=list(HealthCheck))(given(programs())(keep))
        seed(s)(test)()
        for p in drawn:
            if time.time() - started > budget:
                return None
            candidate = with_door(p, door)
            if fits(door, p) and catches(candidate, door):
                return candidate
    return None


def main(doors: list[str]) -> int:
    found = json.loads(DATA.read_text()) if DATA.exists() else {}
    for door in doors or list(DOORS):
        t = time.time()
        program = search(door)
        print(f"{door}: {'found' if program is not None else 'NOT FOUND'} in {time.time() - t:.0f} s", flush=True)
        if program is not None:
            found[door] = {"program": to_dict(program)}
    DATA.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    return 0 if all(d in found for d in DOORS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
