"""Throughput of the harness, and its overhead over plain ``torch.compile``.

``python -m harness bench`` draws programs as a campaign does, then runs each
one, in one process on one thread, as:

- *bare*: what a user's own loop does with the same program: render and load
  it as the harness does, ``torch._dynamo.reset()``, ``torch.compile`` with
  deduplication on and the program's own compile options, one forward call
  and one backward pass (the sum of the floating outputs that require grad);
- each *oracle set*: ``run_program`` with the run those oracles need
  (``oracles.registry.run_config``), then ``judge``.

The runs of one program alternate, in an order shuffled afresh (seeded) for
every program and repeat, so no side always runs first or always after the
same other side; one warm-up of each comes first and is not counted (the
first compile in a process pays one-off imports). With ``--repeat`` above 1
each program's run with the median total counts. Compile caches that
would let a later compile of the same program skip work (inductor's FX graph
cache, AOTAutograd's cache) are off, on both sides alike.

Per set: programs per second per worker, mean seconds per program, the ratio
harness time / bare time (total over all programs, and the median of the
per-program ratios; also in CPU time of this process, which other work on the
machine disturbs less than wall time), and where the time goes (``Outcome.seconds``: the eager
runs, the compile under test, each companion; ``judge``: the oracles; ``other``:
the rest).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import platform
import random
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch._dynamo
from torch.utils._pytree import tree_flatten

from generators.codegen import compile_kwargs, render
from generators.ir import Program
from harness.backends import BackendError, resolve
from harness.loader import load_source
from harness.outcome import RunConfig
from harness.pipeline import InvalidProgram, isolated_global_state, run_eager, run_program
from oracles import guards
from oracles.registry import ORACLES, judge, run_config

# Oracle sets measured, by name; each is run as its oracles' own run_config.
SETS: dict[str, tuple[str, ...]] = {
    "differential": ("differential",),
    "structural": ("differential", "hygiene", "region_identity", "rewrite", "graph_validity", "completeness"),
    "dedup_toggle": ("dedup_toggle",),
    "determinism": ("determinism",),
    "guards": (guards.NAME, guards.RECOMPILES),
    "all": tuple(ORACLES),
}

BARE = "bare"
BATCH = 25  # programs drawn per Hypothesis run, as a campaign draws them


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="aot_eager", help="built-in name or package.module:callable")
    parser.add_argument("-n", type=int, default=20, help="programs to measure (eager-valid ones)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="runs of every program per side (median kept)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    parser.add_argument("--sets", default="", help=f"comma-separated oracle sets (default: all of {', '.join(SETS)})")


# -- drawing -----------------------------------------------------------------

def draw_programs(n: int, seed: int, max_batches: int = 40) -> list[Program]:
    """``n`` distinct programs that run in eager, drawn as a campaign draws
    them (``programs()`` under a fixed Hypothesis seed): the same ``seed``
    gives the same programs, a smaller ``n`` a prefix of them."""
    from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

    from generators.strategies import programs

    found: list[Program] = []
    seen: set[str] = set()

    def body(program: Program) -> None:
        key = program.to_json()
        if len(found) >= n or key in seen:
            return
        seen.add(key)
        if runs_in_eager(program):
            found.append(program)

    for batch in range(max_batches):
        if len(found) >= n:
            break
        test = settings(max_examples=BATCH, database=None, deadline=None, phases=[Phase.generate],
                        suppress_health_check=list(HealthCheck))(given(programs())(body))
        hyp_seed(seed * 100_003 + batch)(test)()
    return found


def runs_in_eager(program: Program) -> bool:
    try:
        with isolated_global_state():
            run_eager(load_source(render(program)), program, RunConfig())
        return True
    except InvalidProgram:
        return False


# -- the two sides -------------------------------------------------------------

def run_bare(program: Program, backend: str) -> dict[str, float]:
    """A plain user loop's cost for one program, by stage; and whether it crashed."""
    seconds: dict[str, float] = {}
    spec = resolve(backend)
    t0 = t = time.perf_counter()
    module = load_source(render(program))
    torch.manual_seed(program.seed)
    model = module.Program()
    inputs = module.make_inputs()
    seconds["load"] = time.perf_counter() - t
    crashed = 0.0
    with isolated_global_state(), _inductor_config(spec.inductor_config):
        t = time.perf_counter()
        torch._dynamo.reset()
        try:
            with torch._dynamo.config.patch(use_graph_deduplication=True):
                compiled = torch.compile(model, backend=spec.compiler_fn(), **compile_kwargs(program), **spec.options)
                out = compiled(*inputs)
            seconds["compile+forward"] = time.perf_counter() - t
            t = time.perf_counter()
            loss = [x.sum() for x in tree_flatten(out)[0]
                    if isinstance(x, torch.Tensor) and x.requires_grad and x.is_floating_point()]
            if loss:
                torch.stack([x.float() for x in loss]).sum().backward()
            seconds["backward"] = time.perf_counter() - t
        except Exception:  # a compiler bug: what it cost is still the user's cost
            seconds.setdefault("compile+forward", time.perf_counter() - t)
            crashed = 1.0
    seconds["total"] = time.perf_counter() - t0
    seconds["crashed"] = crashed
    return seconds


def _inductor_config(settings: dict):
    if not settings:
        return contextlib.nullcontext()
    import torch._inductor.config

    return torch._inductor.config.patch(settings)


def run_harness(program: Program, config: RunConfig, names: tuple[str, ...]) -> dict[str, float]:
    t0 = time.perf_counter()
    outcome = run_program(program, config)
    t = time.perf_counter()
    judge(outcome, names)
    seconds = dict(outcome.seconds)
    seconds["judge"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    seconds["other"] = max(0.0, seconds["total"] - sum(v for k, v in seconds.items() if k != "total"))
    return seconds


@contextlib.contextmanager
def no_compile_caches():
    """Neither side may reuse a compile of the same program from the other's run."""
    import torch._functorch.config
    import torch._inductor.config

    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        yield


# -- the report ----------------------------------------------------------------

@dataclass
class Side:
    name: str
    oracles: tuple[str, ...] = ()
    runs: list[dict[str, float]] = field(default_factory=list)  # per program: median stage seconds


def _median_runs(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per stage the value of the run with the median total (the lower one of
    an even count; one real run, so the stages add up)."""
    ordered = sorted(runs, key=lambda r: r["total"])
    return ordered[(len(ordered) - 1) // 2]


def summarize(sides: dict[str, Side]) -> dict:
    bare = sides[BARE]
    bare_total = sum(r["total"] for r in bare.runs)
    out: dict = {}
    for name, side in sides.items():
        if not side.runs:
            continue
        total = sum(r["total"] for r in side.runs)
        cpu = sum(r["cpu"] for r in side.runs)
        n = len(side.runs)
        stages: dict[str, float] = {}
        for r in side.runs:
            for k, v in r.items():
                if k not in ("total", "crashed", "cpu"):
                    stages[k] = stages.get(k, 0.0) + v
        entry = {
            "oracles": list(side.oracles),
            "programs": n,
            "seconds_total": round(total, 4),
            "seconds_per_program": round(total / n, 4),
            "programs_per_second_per_worker": round(n / total, 4) if total else 0.0,
            "cpu_seconds_per_program": round(cpu / n, 4),
            "stages_per_program": {k: round(v / n, 4) for k, v in stages.items()},
        }
        if name == BARE:
            entry["crashed"] = int(sum(r.get("crashed", 0.0) for r in side.runs))
        else:
            entry["ratio"] = round(total / bare_total, 3) if bare_total else None
            bare_cpu = sum(r["cpu"] for r in bare.runs)
            entry["cpu_ratio"] = round(cpu / bare_cpu, 3) if bare_cpu else None
            entry["median_ratio"] = round(statistics.median(
                r["total"] / b["total"] for r, b in zip(side.runs, bare.runs)), 3)
        out[name] = entry
    return out


def table(report: dict) -> str:
    rows = [("set", "progs", "progs/s/worker", "s/program", "ratio", "median", "cpu ratio",
             "where the time goes (s/program)")]
    for name, e in report["sets"].items():
        stages = ", ".join(f"{k} {v:.3f}" for k, v in e["stages_per_program"].items())
        ratio = "1.000" if name == BARE else f"{e['ratio']:.3f}"
        median = "1.000" if name == BARE else f"{e['median_ratio']:.3f}"
        cpu = "1.000" if name == BARE else f"{e['cpu_ratio']:.3f}"
        rows.append((name, str(e["programs"]), f"{e['programs_per_second_per_worker']:.3f}",
                     f"{e['seconds_per_program']:.3f}", ratio, median, cpu, stages))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(r[-1]))
    head = (f"bench: {report['programs']} programs x {report['repeat']} on {report['backend']}, "
            f"torch {report['torch']}, 1 thread; ratio = harness seconds / bare seconds")
    return "\n".join([head, "", *lines])


def run(backend: str, n: int, seed: int, repeat: int, set_names: tuple[str, ...],
        progress: Callable[[str], None] = print) -> dict:
    resolve(backend)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="invoke_subgraph traced multiple backward graphs")
    chosen = {name: SETS[name] for name in set_names}
    configs = {name: run_config(backend, names) for name, names in chosen.items()}
    t = time.perf_counter()
    programs = draw_programs(n, seed)
    progress(f"drew {len(programs)} eager-valid programs in {time.perf_counter() - t:.1f} s")

    sides: dict[str, Side] = {BARE: Side(BARE)}
    sides.update({name: Side(name, names) for name, names in chosen.items()})
    order = list(sides)

    def measure(side: str, program: Program) -> dict[str, float]:
        gc.collect()
        cpu = time.process_time()
        if side == BARE:
            seconds = run_bare(program, backend)
        else:
            seconds = run_harness(program, configs[side], chosen[side])
        seconds["cpu"] = time.process_time() - cpu
        return seconds

    errors: list[dict] = []
    with no_compile_caches():
        if programs:  # warm-up, not counted: one-off imports and first-compile costs
            for side in order:
                with contextlib.suppress(Exception):
                    measure(side, programs[0])
        shuffle = random.Random(seed)
        for i, program in enumerate(programs):
            runs: dict[str, list[dict[str, float]]] = {s: [] for s in order}
            try:
                for _ in range(repeat):
                    for side in shuffle.sample(order, len(order)):
                        runs[side].append(measure(side, program))
            except Exception:  # a harness bug: this program counts nowhere, so the sides stay paired
                errors.append({"program": i, "traceback": traceback.format_exc()[-3000:]})
                continue
            for side in order:
                sides[side].runs.append(_median_runs(runs[side]))
            progress(f"[{i + 1}/{len(programs)}] " + ", ".join(
                f"{s} {sides[s].runs[-1]['total']:.2f}s" for s in order))

    return {
        "backend": backend,
        "seed": seed,
        "repeat": repeat,
        "programs": len(sides[BARE].runs),
        "errors": errors,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "sets": summarize(sides),
    }


def main(args: argparse.Namespace) -> int:
    set_names = tuple(s for s in args.sets.split(",") if s) or tuple(SETS)
    unknown = [s for s in set_names if s not in SETS]
    if unknown:
        print(f"error: unknown oracle set(s) {', '.join(unknown)}: use {', '.join(SETS)}", file=sys.stderr)
        return 2
    if args.n < 1 or args.repeat < 1:
        print("error: -n and --repeat must be positive", file=sys.stderr)
        return 2
    try:
        report = run(args.backend, args.n, args.seed, args.repeat, set_names)
    except BackendError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(report))
    for e in report["errors"]:
        print(f"harness error on program {e['program']}:\n{e['traceback']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
        print(f"json: {args.json}")
    return 0
