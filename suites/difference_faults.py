"""Finding each planted fault of ``suites.planted_differences`` the way a
campaign would: draw programs, keep those that show the fault's catalogue
entry (``generators.differences``), and judge each on the honest pipeline
and under the fault. A program the honest pipeline already fails (a real
torch bug) proves nothing about the fault and is passed over."""

from __future__ import annotations

import json
import sys
from fnmatch import fnmatchcase
import time
from pathlib import Path
from typing import Optional

from hypothesis import HealthCheck, given, seed, settings

from generators.differences import BY_NAME, LAYOUT_READS, SHAPE_READS, TYPE_READS, coverage, realise
from generators.forms import FORMS
from generators.ir import Free, Program, to_dict
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


def _one_instance(program: Program) -> Optional[Program]:
    """Every call of the module block through one shared instance."""
    from dataclasses import replace

    from generators.check import PER_INSTANCE, check
    from generators.ir import MalformedProgram

    shared = replace(program, sections=tuple(replace(s, structure="for_range") if s.structure in PER_INSTANCE else s
                                             for s in program.sections))
    try:
        check(shared)
    except MalformedProgram:
        return None
    return shared


# Differences no variation names (the program's structure holds them), and how to take each away.
REMOVERS = {"object:instances": _one_instance}


def without(program: Program, entry: str) -> Optional[Program]:
    """``program`` with ``entry``'s difference taken away (its variation removed)."""
    if entry in REMOVERS:
        return REMOVERS[entry](program)
    variation = BY_NAME[entry].variation
    kinds = [k for k in program.variations() if variation and k.startswith(variation)]
    return equalize(program, kinds) if kinds else None


def attributable(entry: str, program: Program, dedup: bool, caught: list) -> bool:
    """Whether the fault was caught through the entry's own difference: a
    change between compiled calls that realises the entry, or a difference
    between repeats whose removal leaves the fault nothing to act on."""
    patterns = BY_NAME[entry].between_calls
    for verdict in caught:
        kind = (verdict.details.get("variant") or {}).get("kind", "")
        if kind and any(fnmatchcase(kind, p) for p in patterns):
            return True
    plain = without(program, entry)
    return plain is not None and failures(plain, dedup, entry) == []


def _reads_free(*ops: str):
    return lambda p: any(s.op in ops and any(isinstance(o, Free) for o in s.operands) for b in p.blocks() for s in b.body)


def _has(*ops: str):
    return lambda p: any(s.op in ops for b in p.blocks() for s in b.body)


def _varies(prefix: str):
    return lambda p: any(k.startswith(prefix) for k in p.variations())


def _region(p: Program) -> bool:
    return any(b.compile_region for b in p.blocks())


# What else a program needs for an entry's fault to have something to act on
# (beyond showing the entry): the programs the search judges first.
NEEDS = {
    "type:int_float": _reads_free(*TYPE_READS), "type:bool_number": _reads_free(*TYPE_READS),
    "type:tuple_list": _reads_free(*TYPE_READS), "type:number_subclass": _has("type_is_int"),
    "derived:shape": lambda p: _has(*SHAPE_READS)(p) and _varies("tensor:shape")(p),
    "derived:dtype": lambda p: _has("dtype_branch", "softmax_upcast")(p) and _varies("tensor:dtype")(p),
    "derived:layout": lambda p: _has(*LAYOUT_READS)(p) and (_varies("tensor:layout")(p) or _varies("tensor:view")(p)),
    "derived:requires_grad": lambda p: _has("requires_grad_branch")(p) and _varies("tensor:requires_grad")(p),
    "derived:python_type": _has(*TYPE_READS), "object:callable_value": _has("apply"),
    "object:instances": lambda p: _region(p) and p.block.kind == "module" and bool(p.block.weights),
    "tensor:frozen_params": lambda p: _region(p) and _varies("frozen")(p),
    # a reused body computes differently only where it read the metadata the check forgot
    "tensor:dtype": lambda p: _region(p) and _varies("tensor:dtype")(p) and _has("dtype_branch", "softmax_upcast")(p),
    "tensor:layout": lambda p: _region(p) and _has(*LAYOUT_READS)(p) and _varies("tensor:")(p),
    "tensor:requires_grad": lambda p: _region(p) and _varies("tensor:requires_grad")(p)
    and _has("requires_grad_branch")(p),
    "state:global": _varies("set:global"), "state:class_attr": _varies("set:class_attr"),
    "state:dataclass": _varies("set:dataclass"), "state:namespace": _varies("set:namespace"),
}
# Entries whose fault acts in the deduplication pass: judged with it on.
IN_THE_PASS = ("tensor:shape", "tensor:alias", "state:grad_mode", "state:inference_mode",
               "state:default_dtype")


# Ops a search draws from for entries whose fault acts only where the body reads something
# (None: every op): the reads, and a few plain ops around them.
_PLAIN = ("sin", "mul_scalar", "add", "tanh")
FOCUS = {
    "derived:shape": SHAPE_READS, "derived:dtype": ("dtype_branch", "softmax_upcast"), "derived:layout": LAYOUT_READS,
    "derived:requires_grad": ("requires_grad_branch",), "derived:python_type": TYPE_READS,
    "type:int_float": TYPE_READS, "type:bool_number": TYPE_READS, "type:tuple_list": ("isinstance_tuple",),
    "type:number_subclass": ("type_is_int",), "tensor:dtype": ("dtype_branch",),
    "tensor:requires_grad": ("requires_grad_branch",), "tensor:layout": LAYOUT_READS, "object:callable_value": ("apply",),
}


def drawn(n: int, at: int, ops: Optional[tuple[str, ...]] = None) -> list[Program]:
    out: list[Program] = []

    @seed(at)
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(programs(edges=True, ops=(*ops, *_PLAIN) if ops else None))
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
    needs = NEEDS.get(entry, lambda p: True)
    for p in drawn(n, at, FOCUS.get(entry)):
        if time.monotonic() - started > budget:
            break
        q = realise(p, entry) or (None if entry in FORMS else p)  # a retype between repeats, if one fits
        if q is None or not needs(q) or not shows(q, entry):
            continue
        tried += 1
        for dedup in (True,) if entry in IN_THE_PASS else (False,):
            caught = failures(q, dedup, entry)  # the fault first: most programs give it nothing to act on
            if not caught or failures(q, dedup) != []:
                continue
            if attributable(entry, q, dedup, caught):
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
        data[entry] = record(entry, search(entry, n=3000, budget=budget))
        print(entry, {k: v for k, v in data[entry].items() if k != "program"}, flush=True)
        DATA.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    return 0 if all("program" in data.get(e, {}) for e in FAULTS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
