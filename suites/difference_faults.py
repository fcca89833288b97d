"""Finding each planted fault of ``suites.planted_differences`` the way a
campaign would: draw programs, keep those that show the fault's catalogue
entry (``generators.differences``), and judge each on the honest pipeline
and under the fault. A program the honest pipeline already fails (a real
torch bug) proves nothing about the fault and is passed over."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

from hypothesis import HealthCheck, given, seed, settings

from generators.differences import BY_NAME, coverage, realise
from generators.ir import Program, to_dict
from generators.strategies import programs
from generators.variants import variants
from generators.variation import equalize
from harness.pipeline import InvalidProgram, run_program
from oracles.registry import judge, run_config

from .planted_differences import FAULTS

DATA = Path(__file__).parent / "data" / "planted_differences.json"
ORACLES = ("differential", "guards", "compile_region", "dedup_toggle", "region_identity")


def shows(program: Program, entry: str) -> bool:
    return entry in coverage(program, [v.kind for v in variants(program)])


def failures(program: Program, dedup: bool, fault: Optional[str] = None) -> Optional[list]:
    """The failing verdicts of one run (None: the program is not valid);
    under the planted fault of catalogue entry ``fault``, if given."""
    def run():
        return run_program(program, run_config("aot_eager", ORACLES, variants=-1, dedup=dedup))

    try:
        if fault is None:
            outcome = run()
        else:
            with FAULTS[fault]():
                outcome = run()
    except InvalidProgram:
        return None
    return [v for v in judge(outcome, ORACLES) if v.failed]


def without(program: Program, entry: str) -> Optional[Program]:
    """``program`` with ``entry``'s difference taken away (its variation removed)."""
    variation = BY_NAME[entry].variation
    kinds = [k for k in program.variations() if variation and k.startswith(variation)]
    return equalize(program, kinds) if kinds else None


def drawn(n: int, at: int) -> list[Program]:
    out: list[Program] = []

    @seed(at)
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(programs())
    def collect(p: Program) -> None:
        out.append(p)

    collect()
    return out


def search(entry: str, n: int = 300, budget: float = 120.0, at: int = 0) -> dict:
    """The first drawn program showing ``entry`` that the honest pipeline
    passes and the fault fails: ``{"program", "dedup", "oracles", "tried",
    "seconds"}``, or ``{"tried", "seconds"}`` without ``program`` if none did
    within ``budget`` seconds."""
    started, tried = time.monotonic(), 0
    for p in drawn(n, at):
        if time.monotonic() - started > budget:
            break
        q = realise(p, entry)
        if q is None or not shows(q, entry):
            continue
        tried += 1
        for dedup in (False, True):
            if failures(q, dedup) != []:
                continue
            caught = failures(q, dedup, entry)
            if caught:
                return {"program": q, "dedup": dedup, "oracles": sorted({v.oracle for v in caught}),
                        "verdict": caught[0], "tried": tried, "seconds": round(time.monotonic() - started, 1)}
    return {"tried": tried, "seconds": round(time.monotonic() - started, 1)}


def record(entry: str, found: dict) -> dict:
    """A search result as the data file keeps it."""
    kept = {k: found[k] for k in ("tried", "seconds")}
    if "program" in found:
        verdict = found["verdict"]
        kept.update(program=to_dict(found["program"]), dedup=found["dedup"], oracles=found["oracles"],
                    verdict={"oracle": verdict.oracle, "kind": verdict.kind,
                             "details": {k: v for k, v in verdict.details.items() if k in ("variant", "label")}})
    return kept


def main(entries: list[str], budget: float = 300.0) -> int:
    """Search for every entry (default: all that have no program yet) and keep what was found."""
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    torch._logging.set_logs(dynamo=logging.CRITICAL)
    data = json.loads(DATA.read_text()) if DATA.exists() else {}
    for entry in entries or [e for e in FAULTS if "program" not in data.get(e, {})]:
        data[entry] = record(entry, search(entry, n=400, budget=budget))
        print(entry, {k: v for k, v in data[entry].items() if k != "program"}, flush=True)
        DATA.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    return 0 if all("program" in data.get(e, {}) for e in FAULTS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
