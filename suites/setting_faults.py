"""Finding each planted fault of ``suites.planted_settings`` the way a
campaign would: draw programs (the edge profile, which gives every other
program a setting), keep those drawn with the fault's setting, and judge
each on the honest pipeline, under the fault, and under the fault without
the setting. A program the honest pipeline already fails (a real torch bug)
proves nothing about the fault and is passed over."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

from generators.ir import Program, to_dict
from harness.pipeline import InvalidProgram, run_program
from oracles.registry import judge, run_config

from .difference_faults import drawn
from .planted_settings import FAULTS

DATA = Path(__file__).parent / "data" / "planted_settings.json"
ORACLES = ("differential", "dedup_toggle")
# The backend each family's fault is reached through: the partitioner under a budget is the min-cut one.
BACKENDS = {"inline": "aot_eager", "partition": "aot_eager_decomp_partition", "alias": "aot_eager"}


def failures(program: Program, family: str, planted: bool) -> Optional[list]:
    """The failing verdicts of one run with deduplication on (None: the
    program is not valid), under ``family``'s planted fault if ``planted``."""
    import contextlib

    fault, _ = FAULTS[family]
    try:
        with fault() if planted else contextlib.nullcontext():
            outcome = run_program(program, run_config(BACKENDS[family], ORACLES, dedup=True))
    except InvalidProgram:
        return None
    return [v for v in judge(outcome, ORACLES) if v.failed]


def without_settings(program: Program) -> Program:
    return replace(program, options=replace(program.options, settings=()))


def search(family: str, n: int = 400, budget: float = 120.0, at: int = 0) -> dict:
    """The first drawn program compiled under ``family``'s setting that the
    honest pipeline passes, the fault fails, and the fault passes once the
    setting is taken away: ``{"program", "oracles", "verdict", "tried",
    "seconds"}``, or ``{"tried", "seconds"}`` if none did within ``budget``."""
    started, tried = time.monotonic(), 0
    _, setting = FAULTS[family]
    for p in drawn(n, at):
        if time.monotonic() - started > budget:
            break
        if setting not in p.options.settings:
            continue
        tried += 1
        caught = failures(p, family, True)  # the fault first: most programs give it nothing to act on
        if not caught or failures(p, family, False) != [] or failures(without_settings(p), family, True) != []:
            continue
        return {"program": p, "oracles": sorted({v.oracle for v in caught}), "verdict": caught[0], "tried": tried,
                "seconds": round(time.monotonic() - started, 1)}
    return {"tried": tried, "seconds": round(time.monotonic() - started, 1)}


def record(found: dict) -> dict:
    kept = {k: found[k] for k in ("tried", "seconds")}
    if "program" in found:
        v = found["verdict"]
        kept.update(program=to_dict(found["program"]), oracles=found["oracles"],
                    verdict={"oracle": v.oracle, "kind": v.kind, "details": {}})
    return kept


def main(families: list[str], budget: float = 300.0) -> int:
    """Search for every family (default: those with no program yet) and keep what was found."""
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    torch._logging.set_logs(dynamo=logging.CRITICAL)
    data = json.loads(DATA.read_text()) if DATA.exists() else {}
    for family in families or [f for f in FAULTS if "program" not in data.get(f, {})]:
        data[family] = record(search(family, n=3000, budget=budget))
        print(family, {k: v for k, v in data[family].items() if k != "program"}, flush=True)
        DATA.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    return 0 if all("program" in data.get(f, {}) for f in FAULTS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
