"""Turn a failing verdict into a finding with a stable signature.

A signature names the bug, not the program: the oracle, the kind of failure,
the layer to blame (re-run with deduplication off: if the failure goes away,
the pass is to blame) and, for wrong values, which kind of per-repeat argument
has to differ between repeats for it to appear (found by giving every repeat
the same value for one argument at a time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from generators.check import check
from generators.ir import MalformedProgram, Program, Repeat
from harness.outcome import Outcome, RunConfig
from harness.pipeline import run_program
from oracles.registry import ORACLES
from oracles.verdict import Verdict


@dataclass
class Finding:
    signature: str
    verdict: Verdict
    program: Program
    config: RunConfig
    culprit: str  # "dedup" or "backend"
    trigger: str  # for wrong values: the arg types that must differ; else ""
    source: str = ""
    extra: dict = field(default_factory=dict)


def normalize(message: str) -> str:
    """Drop what varies between hits of one bug: numbers, names, addresses."""
    message = re.sub(r"0x[0-9a-fA-F]+", "ADDR", message)
    message = re.sub(r"/[\w./-]+\.py", "FILE", message)
    message = re.sub(r"\b(gp_)?[0-9a-f]{16}\b", "ID", message)
    message = re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "N", message)
    return message[:200]


def with_equal_args(program: Program, names: list[str]) -> Optional[Program]:
    """``program`` with every repeat given repeat 0's value for ``names``."""
    idx = [program.block.args.index(n) for n in names]
    first = program.repeat.args[0]
    rows = tuple(
        tuple(first[j] if j in idx else v for j, v in enumerate(row)) for row in program.repeat.args
    )
    candidate = replace(program, repeat=Repeat(program.repeat.structure, program.repeat.flow, rows))
    try:
        check(candidate)
    except MalformedProgram:
        return None
    return candidate


def _fails(program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict]) -> bool:
    return oracle(run_program(program, config)).failed


def triage(outcome: Outcome, verdict: Verdict) -> Finding:
    program, config = outcome.program, outcome.config
    oracle = ORACLES[verdict.oracle]
    culprit = "backend"
    if config.dedup and not _fails(program, replace(config, dedup=False), oracle):
        culprit = "dedup"
    trigger = ""
    if verdict.kind == "crash":
        detail = f"{verdict.details.get('stage')}:{normalize(verdict.message)}"
    else:
        trigger = _trigger(program, config, oracle) if culprit == "dedup" else ""
        detail = trigger
    signature = ":".join(p for p in (verdict.oracle, verdict.kind, culprit, detail) if p)
    return Finding(signature, verdict, program, config, culprit, trigger, outcome.source)


def _trigger(program: Program, config: RunConfig, oracle: Callable[[Outcome], Verdict]) -> str:
    """The kind of argument whose difference between repeats alone brings the
    failure out; "identical-repeats" when it fails with no difference at all."""
    differing = program.differing_args()
    same = with_equal_args(program, differing)
    if not differing or (same is not None and _fails(same, config, oracle)):
        return "identical-repeats"
    type_of = {n: type(program.repeat.args[0][program.block.args.index(n)]).__name__ for n in differing}
    for kind in sorted(set(type_of.values())):
        candidate = with_equal_args(program, [n for n in differing if type_of[n] != kind])
        if candidate is not None and _fails(candidate, config, oracle):
            return kind
    return "combined-args"
