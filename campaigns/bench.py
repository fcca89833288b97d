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

Then, unless skipped, two campaign-level figures, each from a real campaign
(``campaigns.campaign.run``: all oracles, worker processes, triage, follow-ups)
in a process of its own, so that a planted Dynamo fault its check resolves is
never entered in this one:

- *campaign* (``--campaign N``): N programs on the bench's backend with
  ``--workers`` workers: wall seconds, programs per second per worker, the
  ratio of seconds per program per worker to the bare loop's seconds per
  program (the bench's programs), the same against the bare loop on the
  campaign's own programs (``same_programs``: a campaign draws its own mix),
  and from its ``summary.json`` the seconds per program by stage,
  triage and follow-up counts and the root causes;
- *planted faults* (``--faults``): per fault of ``FAULTS``, a campaign on
  that fault's backend that stops at the first finding no known issue names
  (``Options.stop_on_new``), or at ``--fault-budget`` seconds: the seconds
  from its start event to that finding event in ``findings.jsonl``, its
  signature, the programs run by then, and the seconds in bare programs'
  worth (seconds / bare seconds per program).
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
import tempfile
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
from generators.doors import with_door
from generators.ir import Program, from_dict
from harness.backends import BackendError, resolve
from harness.loader import load_source
from harness.outcome import RunConfig
from harness.pipeline import InvalidProgram, isolated_global_state, run_eager, run_program
from oracles import guards
from oracles.registry import ORACLES, judge, run_config
from campaigns.allocation import default_workers, read as read_allocation
from campaigns.campaign import BATCH, PROGRAMS, Options  # BATCH: programs per Hypothesis run, as a campaign draws them
from reports.ledger import LOG, read_events

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

# Planted faults timed to their first finding: name -> campaign backend. Only
# strings: they are resolved in the campaign's processes (harness.backends),
# never imported here. Every planted fault in suites/ a campaign can run on
# CPU, but the ones that kill or hang the worker (abort_or_hang,
# abort_on_subgraph_calls), the CUDA-graph ones (planted_cudagraphs) and
# float_sign_guarded (the guard Dynamo should have: not a fault). A
# ``<fault>__aot_eager`` backend is aot_eager with a planted Dynamo fault
# entered in the worker process.
FAULTS: dict[str, str] = {
    # wrong backends (suites/planted.py)
    "perturb_one_element": "suites.planted:perturb_one_element",
    "wrong_dtype": "suites.planted:wrong_dtype",
    "drop_gradient": "suites.planted:drop_gradient",
    "zero_sign_lost": "suites.planted:zero_sign_lost",
    "nan_zeroed": "suites.planted:nan_zeroed",
    "corrupt_every_third_invoke_subgraph": "suites.planted:corrupt_every_third_invoke_subgraph",
    "leak_dispatch_mode": "suites.planted:leak_dispatch_mode",
    "corrupt_second_inner_call": "suites.planted_nested:corrupt_second_inner_call",
    # the deduplication pass itself (suites/planted_pass.py)
    "ints_ignored": "suites.planted_pass:ints_ignored__aot_eager",
    "grad_mode_ignored": "suites.planted_pass:grad_mode_ignored__aot_eager",
    "tensor_metadata_ignored": "suites.planted_pass:tensor_metadata_ignored__aot_eager",
    "arguments_swapped": "suites.planted_pass:arguments_swapped__aot_eager",
    "mutation_check_skipped": "suites.planted_pass:mutation_check_skipped__aot_eager",
    "cyclic_edge": "suites.planted_pass:cyclic_edge__aot_eager",
    "grad_mode_moved": "suites.planted_pass:grad_mode_moved__aot_eager",
    "regions_dropped": "suites.planted_pass:regions_dropped__aot_eager",
    "regions_flaky": "suites.planted_pass:regions_flaky__aot_eager",
    "extra_guard": "suites.planted_pass:extra_guard__aot_eager",
    "mutation_reordered": "suites.planted_pass:mutation_reordered__aot_eager",
    # Dynamo's guards (suites/planted_guards.py)
    "dtype_check_dropped": "suites.planted_guards:dtype_check_dropped__aot_eager",
    "constant_check_dropped": "suites.planted_guards:constant_check_dropped__aot_eager",
    "module_attribute_check_dropped": "suites.planted_guards:module_attribute_check_dropped__aot_eager",
    "storage_guarded": "suites.planted_guards:storage_guarded__aot_eager",
    "float_guard_signless": "suites.planted_guards:float_guard_signless__aot_eager",
    "module_identity_dropped": "suites.planted_guards:module_identity_dropped__aot_eager",
    "module_hook_check_dropped": "suites.planted_guards:module_hook_check_dropped__aot_eager",
    "dict_item_check_dropped": "suites.planted_guards:dict_item_check_dropped__aot_eager",
    "dict_key_check_dropped": "suites.planted_guards:dict_key_check_dropped__aot_eager",
    # what only the generator's edge kinds reach (suites/planted_edges.py)
    "pending_stores_ignored": "suites.planted_edges:pending_stores_ignored__aot_eager",
    "last_region_as_reference": "suites.planted_edges:last_region_as_reference__aot_eager",
    "object_fields_unguarded": "suites.planted_edges:object_fields_unguarded__aot_eager",
    "writes_deferred": "suites.planted_edges:writes_deferred",
}
# one OpInfo op wrong in one spelling, one dtype, or inside a region only (suites/planted_ops.py): what a
# default --backend campaign's sweep (campaigns.op_sweep) must find
# (backend name -> the OpInfo op it breaks)
OP_FAULTS = {"torch_hypot": "hypot", "functional_nn_functional_hardtanh": "nn.functional.hardtanh",
             "method_lerp": "lerp", "operator_remainder": "remainder", "aten_logaddexp2": "logaddexp2",
             "inplace_exp2": "exp2", "out_log10": "log10", "dtype_float64_cumprod": "cumprod", "region_sinh": "sinh"}
FAULTS.update({f"op_{name}": f"suites.planted_ops:{name}" for name in OP_FAULTS})
OP_FAULTS = {f"op_{name}": op for name, op in OP_FAULTS.items()}
NO_FAULTS = "none"
CAMPAIGN_BUDGET = 3600.0  # seconds: a safety cap on the --campaign run, which stops at its program count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="aot_eager", help="built-in name or package.module:callable")
    parser.add_argument("-n", type=int, default=20, help="programs to measure (eager-valid ones; 0: none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="runs of every program per side (median kept)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    parser.add_argument("--sets", default="", help=f"comma-separated oracle sets (default: all of {', '.join(SETS)})")
    parser.add_argument("--campaign", type=int, default=40, metavar="N",
                        help="programs of a real campaign on --backend with all oracles (default 40; 0: none)")
    parser.add_argument("--workers", type=int, default=0,
                        help="worker processes of the campaigns (default: the CPUs allotted)")
    parser.add_argument("--faults", default="", metavar="NAMES",
                        help=f"comma-separated planted faults timed to their first finding (default: all "
                             f"{len(FAULTS)} of the catalogue; {NO_FAULTS}: none)")
    parser.add_argument("--fault-budget", type=float, default=90.0, metavar="S",
                        help="seconds per planted fault's campaign (default 90)")
    parser.add_argument("--feedback", choices=("off", "edges", "steer"), default="off",
                        help="the campaigns' --feedback (default off)")
    parser.add_argument("--ab", action="store_true",
                        help="run every planted fault's campaign twice, feedback off and steer, in alternating "
                             "order, and show them side by side")
    parser.add_argument("--out", type=Path, default=None,
                        help="keep the campaigns here (DIR/campaign, DIR/faults/NAME; default: a temporary folder)")


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
    if not report["sets"]:
        return f"bench: no programs measured per oracle set (-n {report['asked']}) on {report['backend']}, " \
               f"torch {report['torch']}"
    return "\n".join([head, "", *lines])


def run(backend: str, n: int, seed: int, repeat: int, set_names: tuple[str, ...],
        progress: Callable[[str], None] = print) -> dict:
    resolve(backend)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="invoke_subgraph traced multiple backward graphs")
    chosen = {name: SETS[name] for name in set_names}
    configs = {name: run_config(backend, names) for name, names in chosen.items()}
    t = time.perf_counter()
    programs = draw_programs(n, seed) if n else []
    if n:
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
        "asked": n,
        "programs": len(sides[BARE].runs),
        "errors": errors,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "sets": summarize(sides),
    }


# -- campaigns ---------------------------------------------------------------------

def _campaign_process(options: Options, label: str) -> tuple[dict | None, float, str]:
    """Runs in a spawned process of its own: (summary, wall seconds, error)."""
    from campaigns.campaign import run as run_campaign_here

    warnings.filterwarnings("ignore", message="invoke_subgraph traced multiple backward graphs")
    last = [time.time()]

    def progress(line: str, final: bool) -> None:
        if final or time.time() - last[0] >= 15:
            last[0] = time.time()
            print(f"  {label}: {line}", flush=True)

    t = time.perf_counter()
    try:
        summary = run_campaign_here(options, progress)
    except Exception as e:  # a bad backend, workers that cannot start: the bench's report says so
        return None, time.perf_counter() - t, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return summary, time.perf_counter() - t, ""


def campaign_in_process(options: Options, label: str) -> tuple[dict | None, float, str]:
    """``campaigns.campaign.run(options)`` in a fresh process: its check
    resolves the backend, which for a planted Dynamo fault
    (``<fault>__<backend>``) enters the fault for good in the process that
    resolves it."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from campaigns.worker_start import start_worker_server

    # its workers' server starts before the process imports torch, as the command line starts it
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker_server,
                             initargs=(options.coverage,)) as pool:
        return pool.submit(_campaign_process, options, label).result()


def _bare_seconds(report: dict) -> float | None:
    """The bare loop's seconds per program in this bench run, if it ran."""
    bare = report.get("sets", {}).get(BARE)
    return bare["seconds_per_program"] if bare and bare.get("programs") else None


def run_campaign(backend: str, programs: int, seed: int, workers: int, out: Path, bare: float | None,
                 progress: Callable[[str], None] = print, feedback: str = "off") -> dict:
    """A real campaign of ``programs`` programs on ``backend``, all oracles."""
    options = Options(backend=backend, budget=CAMPAIGN_BUDGET, seed=seed, out=out, workers=workers,
                      programs=programs, feedback=feedback, sweep="off",  # the search's cost, as before the sweep
                      keep_programs=True)
    progress(f"campaign: {programs} programs on {backend}, all oracles, workers {workers}")
    summary, wall, error = campaign_in_process(options, "campaign")
    entry: dict = {"backend": backend, "seed": seed, "workers": workers, "programs_asked": programs,
                   "out": str(out), "bare_seconds_per_program": bare}
    if summary is None:
        return {**entry, "error": error}
    n = summary["programs"]
    entry.update({
        "programs": n,
        "invalid": summary.get("errors", {}).get("invalid_program", 0),
        "wall_seconds": round(wall, 2),
        "campaign_seconds": summary.get("seconds"),  # from its start to its stop event
        "programs_per_second_per_worker": round(n / wall / workers, 4) if n and wall else 0.0,
        "seconds_per_program_per_worker": round(wall * workers / n, 3) if n else None,
        "ratio_to_bare": round(wall * workers / n / bare, 2) if n and bare else None,
        "seconds_per_program": summary.get("seconds_per_program", {}),
        "triage": summary.get("triage", {}),
        "follow_ups": summary.get("follow_ups", {}),
        "root_causes": summary.get("root_causes", {}),
        "workers_lost": summary.get("workers_lost", {}),
    })
    if "harness_seconds" in summary:  # workers' seconds: torch running programs vs the harness around them
        entry["harness_seconds"] = summary["harness_seconds"]
    progress(f"campaign: the bare loop on its {n} programs")
    entry["same_programs"] = same_programs(out, backend, wall, workers)
    if summary.get("aborted"):
        entry["aborted"] = summary["aborted"]
    return entry


def same_programs(out: Path, backend: str, wall: float, workers: int) -> dict:
    """The campaign against the bare loop on the campaign's own programs (as it ran them, each door taken
    away: a door is a run the harness adds), not on the bench's: the campaign draws its own mix (doors,
    autograd features, swarm and edge batches). ``task_ratio``: the workers' seconds in run tasks (the run,
    triage, the runs without a known issue's trigger, the door) over the bare loop's; ``wall_ratio``: the
    campaign's wall seconds times its workers over the same, fixed costs (start-up, the last repros) and
    idle workers included."""
    kept = [json.loads(line) for line in (out / PROGRAMS).read_text().splitlines() if line.strip()] \
        if (out / PROGRAMS).exists() else []
    events = read_events(out / LOG)
    ran = {e["id"] for e in events if e.get("event") == "program"}
    bare = 0.0
    with no_compile_caches():
        for entry in kept:
            if entry["id"] in ran:
                bare += run_bare(with_door(from_dict(entry["program"]), ""), backend)["total"]
    tasks = sum(e.get("total", 0.0) for e in events if e.get("event") == "task" and e.get("type") == "run")
    n = len(ran & {e["id"] for e in kept})
    if not n or not bare:
        return {"programs": n}
    return {"programs": n, "bare_seconds_per_program": round(bare / n, 3), "task_ratio": round(tasks / bare, 2),
            "wall_ratio": round(wall * workers / bare, 2)}


def first_new_finding(out: Path, op: str = "", ignore: tuple[str, ...] = ()) -> dict | None:
    """From a campaign's event log: the first finding no known issue names
    (``op``: of a swept case of that OpInfo op, run alone; ``ignore``: nor
    one of these signatures), seconds after the start event, and the
    programs run by then (results logged before it: a program's result comes
    before its findings)."""
    start = None
    ran = 0
    swept: dict[str, set] = {}  # a swept case's program id -> its ops
    for e in read_events(out / LOG):
        kind = e.get("event")
        if kind == "start" and start is None:
            start = e["at"]
        elif kind == "sweep_single":
            swept[e["id"]] = {c.split("|")[0] for c in e["cells"]}
        elif kind in ("program", "lost"):
            ran += 1
        elif kind == "finding" and not e.get("known_issue") and start is not None \
                and e["signature"] not in ignore and (not op or op in swept.get(e.get("id"), ())):
            return {"seconds": round(e["at"] - start, 2), "signature": e["signature"], "oracle": e.get("oracle"),
                    "severity": e.get("severity"), "programs": ran}
    return None


def run_fault(name: str, seed: int, workers: int, budget: float, out: Path, bare: float | None,
              progress: Callable[[str], None] = print, feedback: str = "off", backend: str = "",
              options: dict | None = None) -> dict:
    """A campaign on a planted fault's backend (``FAULTS[name]``, or ``backend``) until its first new finding
    (``options``: more ``campaigns.campaign.Options`` fields, e.g. an autograd share, or ``stop_ignores``: the
    new findings of a campaign without the fault, which are not the fault's)."""
    backend = backend or FAULTS[name]
    # op-level faults are the sweep's to find (a default --backend campaign); the others' figures stay
    # comparable with those measured before the sweep
    op = OP_FAULTS.get(name, "")
    options_ = Options(backend=backend, budget=budget, seed=seed, out=out, workers=workers, stop_on_new=not op,
                       stop_on_op=op, feedback=feedback, sweep="auto" if op else "off", **(options or {}))
    progress(f"fault {name}: {backend}, workers {workers}, at most {budget:g} s, feedback {feedback}")
    summary, wall, error = campaign_in_process(options_, name)
    entry: dict = {"backend": backend, "budget": budget, "out": str(out)}
    if summary is None:
        return {**entry, "found": False, "error": error}
    first = first_new_finding(out, op, options_.stop_ignores)
    entry.update({"found": first is not None, "wall_seconds": round(wall, 2), "programs_run": summary["programs"]})
    if first is not None:
        entry.update(first)
        entry["bare_programs"] = round(first["seconds"] / bare, 1) if bare else None
    else:
        entry["known_issues_seen"] = summary.get("root_causes", {}).get("known", {})
    return entry


def run_faults(names: tuple[str, ...], seed: int, workers: int, budget: float, out: Path, bare: float | None,
               campaign: dict | None, progress: Callable[[str], None] = print,
               modes: tuple[str, ...] = ("off",)) -> dict:
    """Each fault's campaign once per feedback mode; with two modes their
    order alternates from fault to fault, so neither always runs first."""
    by_mode: dict[str, dict] = {m: {} for m in modes}
    # a signature the bench's own campaign (no planted fault) also found may be torch's bug, not the fault
    honest = set() if not campaign else {*campaign.get("root_causes", {}).get("new", []),
                                         *campaign.get("root_causes", {}).get("unconfirmed", [])}
    for i, name in enumerate(names):
        for mode in modes if i % 2 == 0 else modes[::-1]:
            folder = out / name if len(modes) == 1 else out / mode / name
            entry = run_fault(name, seed, workers, budget, folder, bare, progress, mode)
            if entry.get("signature") and campaign and "error" not in campaign:
                entry["also_without_fault"] = entry["signature"] in honest
            by_mode[mode][name] = entry
            progress(f"fault {name} (feedback {mode}): " + _fault_cell(entry))
    report = {"seed": seed, "workers": workers, "budget": budget, "bare_seconds_per_program": bare,
              "results": by_mode[modes[0]], "feedback": modes[0]}
    if len(modes) > 1:
        report["ab"] = by_mode
    return report


def faults_ab_table(f: dict) -> str:
    """The planted faults' first findings side by side, one column per feedback mode."""
    modes = list(f["ab"])
    lines = [f"planted faults, feedback {' vs '.join(modes)} (workers {f['workers']}, seed {f['seed']}, at most "
             f"{f['budget']:g} s each): seconds to the first finding no known issue names", "",
             "| fault | " + " | ".join(f"{m}: seconds (programs)" for m in modes) + " | " +
             " | ".join(f"{m}: first new finding" for m in modes) + " |",
             "|---|" + "---|" * (2 * len(modes))]
    for name in f["ab"][modes[0]]:
        cells = [f["ab"][m].get(name, {}) for m in modes]
        times = [f"{e['seconds']:.1f} ({e['programs']})" if e.get("found") else
                 f"not found ({e.get('programs_run', '-')})" for e in cells]
        sigs = [f"`{e['signature']}`" if e.get("found") else (e.get("error") or "-") for e in cells]
        lines.append(f"| {name} | " + " | ".join(times) + " | " + " | ".join(sigs) + " |")
    return "\n".join(lines)


def _fault_cell(e: dict) -> str:
    if e.get("error"):
        return f"error: {e['error']}"
    if not e["found"]:
        return f"not found in {e['budget']:g} s ({e['programs_run']} programs)"
    return f"{e['seconds']:.1f} s, {e['programs']} programs: {e['signature']}"


def campaign_table(c: dict) -> str:
    head = (f"campaign: {c['programs_asked']} programs asked on {c['backend']}, all oracles, "
            f"workers {c['workers']}, seed {c['seed']}")
    if c.get("error"):
        return "\n".join([head, f"  error: {c['error']}"])
    bare = c["bare_seconds_per_program"]
    ratio = (f"{c['ratio_to_bare']:.2f} (bare {bare:.3f} s/program)" if c.get("ratio_to_bare") is not None
             else "n/a: the bare loop was not measured in this run (-n 0)")
    rc = c["root_causes"]
    known = ", ".join(f"{k} x{n}" for k, n in rc.get("known", {}).items()) or "none"
    lines = [
        head,
        f"  programs {c['programs']} (+{c['invalid']} invalid) in {c['wall_seconds']:.1f} s wall "
        f"(campaign {c['campaign_seconds']} s from start to stop event)",
        f"  programs/s/worker {c['programs_per_second_per_worker']:.4f}, "
        f"s/program/worker {c['seconds_per_program_per_worker']}, ratio to bare {ratio} (the bench's programs)",
        "  " + _same_cell(c.get("same_programs") or {}),
        "  s/program by stage: " + (", ".join(f"{k} {v}" for k, v in c["seconds_per_program"].items()) or "none"),
        "  triage: " + (", ".join(f"{k} {v}" for k, v in c["triage"].items()) or "none")
        + "; follow-ups: " + (", ".join(f"{k} {v}" for k, v in c["follow_ups"].items()) or "none"),
        f"  root causes: known {known}; new {len(rc.get('new', []))}; unconfirmed {len(rc.get('unconfirmed', []))}",
    ]
    lines += [f"    new: {s}" for s in rc.get("new", [])]
    lines += [f"    unconfirmed: {s}" for s in rc.get("unconfirmed", [])]
    if c.get("harness_seconds"):
        lines.append("  worker seconds, torch + harness: " + _split_cell(c["harness_seconds"]))
    if c.get("workers_lost"):
        lines.append(f"  workers lost: {c['workers_lost']}")
    if c.get("aborted"):
        lines.append(f"  stopped early: {c['aborted']}")
    return "\n".join(lines)


def _same_cell(same: dict) -> str:
    if not same.get("bare_seconds_per_program"):
        return "on its own programs: n/a (none kept)"
    return (f"on its own {same['programs']} programs (bare {same['bare_seconds_per_program']:.3f} s/program): "
            f"run tasks {same['task_ratio']:.2f} times the bare loop, wall times workers {same['wall_ratio']:.2f}")


def faults_table(f: dict) -> str:
    bare = f["bare_seconds_per_program"]
    head = (f"planted faults: a campaign per fault (all oracles, workers {f['workers']}, seed {f['seed']}, "
            f"at most {f['budget']:g} s); seconds from its start to the first finding no known issue names"
            + ("" if bare else "; bare programs' worth n/a: the bare loop was not measured in this run"))
    rows = [("fault", "seconds", "programs", "bare progs", "first new finding")]
    for name, e in f["results"].items():
        if e.get("error") or not e["found"]:
            rows.append((name, "-", str(e.get("programs_run", "-")), "-", _fault_cell(e)))
            continue
        worth = "-" if e.get("bare_programs") is None else f"{e['bare_programs']:.1f}"
        note = " (also found without the fault)" if e.get("also_without_fault") else ""
        rows.append((name, f"{e['seconds']:.1f}", str(e["programs"]), worth, e["signature"] + note))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [head, ""]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * len(r[-1]))
    return "\n".join(lines)


def _split_cell(split: dict) -> str:
    """summary.json's harness_seconds: per task type, torch's seconds and the harness's; idle seconds."""
    parts = []
    for kind, v in split.items():
        if isinstance(v, dict) and "torch" in v and "harness" in v:
            per = v.get("per_task") or {}
            each = f" (per task {per['torch']} + {per['harness']})" if "torch" in per and "harness" in per else ""
            parts.append(f"{kind} {v.get('tasks', '?')} tasks {v['torch']} + {v['harness']} s{each}")
        elif isinstance(v, dict):  # a repro in a process of its own: not split
            parts.append(f"{kind} {v.get('tasks', '?')} tasks {v.get('seconds')} s")
        else:
            parts.append(f"{kind} {v} s")
    return ", ".join(parts) or "none"


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    set_names = tuple(s for s in args.sets.split(",") if s) or tuple(SETS)
    unknown = [s for s in set_names if s not in SETS]
    if unknown:
        return _error(f"unknown oracle set(s) {', '.join(unknown)}: use {', '.join(SETS)}")
    if args.n < 0 or args.repeat < 1:
        return _error("-n must be a count (0: no per-program measurement) and --repeat positive")
    if args.campaign < 0 or args.workers < 0:
        return _error("--campaign and --workers must be counts (--campaign 0: no campaign; --workers 0: the CPUs allotted)")
    if not args.fault_budget > 0:
        return _error("--fault-budget must be positive seconds")
    fault_names = tuple(s for s in args.faults.split(",") if s) or tuple(FAULTS)
    if fault_names == (NO_FAULTS,):
        fault_names = ()
    unknown = [s for s in fault_names if s not in FAULTS]
    if unknown:
        return _error(f"unknown fault(s) {', '.join(unknown)}: use {NO_FAULTS} or {', '.join(FAULTS)}")
    workers = args.workers or default_workers(read_allocation())
    try:
        report = run(args.backend, args.n, args.seed, args.repeat, set_names)
    except BackendError as e:
        return _error(str(e))
    bare = _bare_seconds(report)
    with contextlib.ExitStack() as stack:
        out = args.out or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        report["campaign"] = (run_campaign(args.backend, args.campaign, args.seed, workers, out / "campaign", bare,
                                           feedback=args.feedback)
                              if args.campaign else None)
        modes = ("off", "steer") if args.ab else (args.feedback,)
        report["faults"] = (run_faults(fault_names, args.seed, workers, args.fault_budget, out / "faults", bare,
                                       report["campaign"], modes=modes) if fault_names else None)
    if args.out is None:  # the temporary folder is gone
        for entry in [report["campaign"] or {}, *(report["faults"] or {}).get("results", {}).values()]:
            entry.pop("out", None)
    print(table(report))
    if report["campaign"]:
        print("\n" + campaign_table(report["campaign"]))
    if report["faults"]:
        print("\n" + faults_table(report["faults"]))
        if report["faults"].get("ab"):
            print("\n" + faults_ab_table(report["faults"]))
    for e in report["errors"]:
        print(f"harness error on program {e['program']}:\n{e['traceback']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
        print(f"json: {args.json}")
    return 0
