"""The generator report: draw N programs, count what they exercise, run each in
eager (forward and backward) and through Dynamo with graph deduplication, and
print how often every op, structure and variation appears, the share of
programs that run in eager and the share that produce region groups.

``--check`` turns the issue's acceptance criteria into an exit status: every
feature of ``generators.features.universe()`` appears, at least 99% run in
eager, at least 40% produce a region group, and the block hierarchy is really
drawn (SHARE_TARGETS).
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

EAGER_TARGET = 0.99
REGION_TARGET = 0.40
# Shares of drawn programs with a feature (any of the listed ones).
SHARE_TARGETS = {
    "at least two distinct blocks": (("blocks:2", "blocks:3+"), 0.20),
    "blocks nested three deep": (("depth:3",), 0.10),
    "a nested_compile_region": (("nested_compile_region",), 0.20),
}


def draw(n: int, seed: int) -> list[str]:
    """``n`` programs (as JSON) from the generator, reproducibly for ``seed``."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from generators.strategies import programs

    drawn: list[str] = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(program):
        drawn.append(program.to_json())

    collect()
    return drawn[:n]


@dataclass
class Measured:
    eager_error: str = ""
    compile_error: str = ""
    region_groups: int = 0
    invoke_subgraph_calls: int = 0
    graph_breaks: int = 0
    seconds: float = 0.0


def measure(program_json: str) -> Measured:
    """Eager validity and what the region tracker found, for one program."""
    import warnings

    warnings.filterwarnings("ignore")
    import logging

    import torch

    torch.set_num_threads(1)
    torch._logging.set_logs(dynamo=logging.ERROR)
    from generators.codegen import render
    from generators.ir import Program
    from harness.loader import load_source
    from harness.outcome import RunConfig
    from harness.pipeline import InvalidProgram, run_compiled, run_eager

    t = time.perf_counter()
    program = Program.from_json(program_json)
    module = load_source(render(program))
    result = Measured()
    try:
        run_eager(module, program, RunConfig())
    except InvalidProgram as e:
        result.eager_error = str(e)[:300]
        return result
    execution, capture = run_compiled(module, program, RunConfig(backend="eager", backward=False))
    if execution.failure is not None:
        result.compile_error = f"{execution.failure.type}: {execution.failure.message}"[:300]
    result.region_groups = len(capture.region_groups)
    result.invoke_subgraph_calls = capture.invoke_subgraph_calls
    result.graph_breaks = capture.graph_breaks
    result.seconds = time.perf_counter() - t
    return result


def _table(title: str, counts: Counter, names: list[str], n: int, width: int = 34) -> list[str]:
    cells = [f"{name[:width - 8]:<{width - 8}}{counts[name]:>6}" for name in names]
    cols = 3
    lines = [f"\n{title}"]
    for i in range(0, len(cells), cols):
        lines.append("  " + "  ".join(cells[i : i + cols]))
    return lines


def report(programs_json: list[str], measured: list[Measured] | None) -> tuple[list[str], dict]:
    from generators.features import features, universe
    from generators.ir import Program

    n = len(programs_json)
    counts: Counter = Counter()
    per_program = [features(Program.from_json(text)) for text in programs_json]
    for fs in per_program:
        counts.update(fs)
    expected = universe()
    missing = [f for f in expected if counts[f] == 0]
    families: dict[str, list[str]] = {}
    for f in expected:
        families.setdefault(f.split(":")[0] if ":" in f else "other", []).append(f)
    lines = [f"{n} programs drawn"]
    for family, names in families.items():
        lines += _table(family, counts, names, n)
    summary: dict = {"programs": n, "missing": missing, "counts": dict(counts), "shares": {}, "short": []}
    lines.append("")
    lines.append(f"features never drawn: {', '.join(missing) if missing else 'none'}")
    for what, (names, target) in SHARE_TARGETS.items():
        hits = sum(any(f in fs for f in names) for fs in per_program)
        summary["shares"][what] = hits / n
        if hits / n < target:
            summary["short"].append(what)
        lines.append(f"{what + ':':<28}{hits}/{n} = {hits / n:.1%} (target {target:.0%})")
    if measured is not None:
        eager_ok = sum(not m.eager_error for m in measured)
        regions = sum(m.region_groups > 0 for m in measured)
        subgraphs = sum(m.invoke_subgraph_calls > 0 for m in measured)
        compile_errors = Counter(m.compile_error.split("\n")[0][:100] for m in measured if m.compile_error)
        eager_errors = Counter(m.eager_error[:140] for m in measured if m.eager_error)
        summary.update(
            eager_valid=eager_ok / n, region_share=regions / n, invoke_subgraph_share=subgraphs / n,
            eager_errors=dict(eager_errors), compile_errors=dict(compile_errors),
        )
        lines.append(f"run in eager without error: {eager_ok}/{n} = {eager_ok / n:.1%} (target {EAGER_TARGET:.0%})")
        lines.append(f"produce >= 1 region group:  {regions}/{n} = {regions / n:.1%} (target {REGION_TARGET:.0%})")
        lines.append(f"produce invoke_subgraph:    {subgraphs}/{n} = {subgraphs / n:.1%}")
        for msg, k in eager_errors.most_common(5):
            lines.append(f"  eager error x{k}: {msg}")
        for msg, k in compile_errors.most_common(5):
            lines.append(f"  compile error x{k} (a finding for the campaign, not a generator bug): {msg}")
    return lines, summary


def run(n: int, seed: int, jobs: int, regions: bool, out: Path | None, check: bool) -> int:
    t = time.perf_counter()
    drawn = draw(n, seed)
    print(f"drew {len(drawn)} programs in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    measured = None
    if regions:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            measured = list(pool.map(measure, drawn, chunksize=8))
    lines, summary = report(drawn, measured)
    summary["seconds"] = round(time.perf_counter() - t, 1)
    print("\n".join(lines))
    if out is not None:
        out.write_text(json.dumps(summary, indent=2, sort_keys=True))
    if not check:
        return 0
    ok = not summary["missing"] and not summary["short"]
    if measured is not None:
        ok = ok and summary["eager_valid"] >= EAGER_TARGET and summary["region_share"] >= REGION_TARGET
    return 0 if ok else 1
