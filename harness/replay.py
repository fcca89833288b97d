"""Call a compiled program the way CUDA graphs are used: warm-up, record, replays.

Every call of a ``ReplayPlan`` gets fresh input values, the same for each run
of that call: eager twice (the nondeterminism gate), float64 eager (the
referee), the backend without CUDA graphs ("plain") and the graphed backend,
each on its own copy of the model, forward and backward. Every output and
gradient of the graphed run is held alive across the next call and read
again after it: CUDA graphs may have reused its memory, and PyTorch promises
either the old value or its "overwritten by a subsequent run" error on access.
What PyTorch reports about CUDA graphs engaging (skips and their reasons,
graphs recorded, warnings) is kept. The harness records; ``oracles.cudagraph``
judges.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from generators.codegen import render
from generators.ir import Program
from generators.replays import ReplayPlan, check_plan, resized

from . import torch_config
from .backends import resolve
from .execute import as_float64, execute, failure
from .hygiene import clean_up, leaked_state
from .loader import load_source
from .outcome import Execution, Failure, RunConfig
from .pipeline import backend_config, isolated_global_state, torch_compile_kwargs

OVERWRITTEN = "overwritten by a subsequent run"  # PyTorch's documented error (cudagraph_trees)
# Where torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter
# writes every "skipping cudagraphs due to ..." (an artifact log, off unless
# asked for; a handler of our own sees it either way).
SKIP_LOG = "torch._inductor.cudagraph_utils.__cudagraphs"
ROLES = ("eager", "eager_again", "reference", "plain", "graphed")
HOLD = ("eager", "graphed")  # roles whose results are held across the next call


@dataclass
class Held:
    """A graphed output or gradient of call ``call``, read again after call + 1."""

    call: int
    where: str  # "output[0]", "grad[param:w0]", ...
    value: Optional[torch.Tensor] = None  # what it holds now (None: reading it raised)
    raised: str = ""  # the error reading it raised
    role: str = "graphed"  # eager's results are held too: what eager changes (an alias of an
    # input or buffer written later) may change under CUDA graphs too
    same_step: bool = False  # read after the second call of its step (ReplayPlan.twice)


@dataclass
class ReplayCall:
    index: int  # position in ReplayOutcome.calls
    phase: str  # ReplayPlan.phase; ":same-step" for a step's second call (ReplayPlan.twice)
    shapes: dict[str, list[int]]
    runs: dict[str, Optional[Execution]]  # by role; "reference" is None when float64 cannot run it
    step: int = 0  # the plan's call this belongs to


@dataclass
class Engagement:
    skips: list[str] = field(default_factory=list)  # PyTorch's skip messages, in order
    skip_count: int = 0  # counters["inductor"]["cudagraph_skips"] bumps
    recorded: Optional[int] = None  # graphs the CUDA graph tree recorded; None: no tree on this device
    warnings: list[str] = field(default_factory=list)  # PyTorch's warnings that name CUDA graphs


@dataclass
class ReplayOutcome:
    program: Program
    plan: ReplayPlan
    backend: str
    plain: str
    device: str
    dedup: bool
    source: str
    calls: list[ReplayCall] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    engagement: Engagement = field(default_factory=Engagement)
    failure: Optional[Failure] = None  # torch.compile itself raised
    leaked_state: list[str] = field(default_factory=list)  # see harness.hygiene; undone at once
    seconds: float = 0.0


class _Collect(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


def recorded_graphs(device: torch.device) -> Optional[int]:
    """CUDA graphs recorded in the device's graph tree (None off CUDA)."""
    if device.type != "cuda":
        return None
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.get_manager(device.index or 0, create_if_none_exists=False)
    if manager is None:
        return 0
    todo, n = list(manager.get_roots()), 0
    while todo:
        node = todo.pop()
        n += 1
        todo += [c for kids in node.children.values() for c in kids]
    return n


@contextlib.contextmanager
def watching(engagement: Engagement):
    logger = logging.getLogger(SKIP_LOG)
    handler = _Collect(engagement.skips)
    logger.addHandler(handler)
    before = counters["inductor"]["cudagraph_skips"]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        logger.removeHandler(handler)
        engagement.skip_count = counters["inductor"]["cudagraph_skips"] - before
        engagement.warnings = list(dict.fromkeys(
            str(w.message) for w in caught if "cudagraph" in str(w.message).lower()))


@contextlib.contextmanager
def full_float32():
    """No TF32 while replaying: by default cuDNN convolutions on Ampere and
    later round float32 inputs to TF32 in eager, so eager and a compiled
    kernel would differ by more than float32 noise for a reason that is
    neither CUDA graphs' nor the compiler's."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def call_seed(program: Program, k: int) -> int:
    return program.seed * 7919 + 104_729 * (k + 1)


def _model(module, program: Program, float64: bool) -> torch.nn.Module:
    torch.manual_seed(program.seed)
    model = module.Program()
    return model.double() if float64 else model


def _inputs(module, seed: int, float64: bool, device: torch.device) -> list:
    torch.manual_seed(seed)
    inputs = module.make_inputs(device)
    return as_float64(inputs) if float64 else inputs


def snapshots(run: Execution) -> dict[str, Any]:
    out: dict[str, Any] = {f"output[{i}]": v for i, v in enumerate(run.outputs)}
    out.update({f"grad[{k}]": v for k, v in run.grads.items()})
    return out


def read_again(t: torch.Tensor) -> tuple[Optional[torch.Tensor], str]:
    try:
        return t.detach().clone(), ""
    except Exception as e:  # PyTorch's documented error is a RuntimeError; anything else is recorded too
        return None, f"{type(e).__name__}: {str(e).strip()[:1000]}"


def run_replay(program: Program, plan: ReplayPlan, backend: str = "reduce-overhead", plain: str | None = None,
               device: str = "cuda", dedup: bool = True, config: tuple = ()) -> ReplayOutcome:
    """Run ``plan``'s calls of ``program`` on ``device``; never raises for a
    failure of the compiler under test (a generator bug or a bad plan raises)."""
    check_plan(program, plan)
    graphed_b = resolve(backend)
    plain_b = resolve(plain or graphed_b.plain or "aot_eager")
    source = render(program)
    module = load_source(source)
    other = load_source(render(resized(program, plan.resize))) if plan.resize else None
    outcome = ReplayOutcome(program, plan, graphed_b.name, plain_b.name, device, dedup, source)
    start = time.perf_counter()
    dev = torch.device(device)
    run_config = RunConfig(backend=backend, dedup=dedup)
    names = [n for n, _ in program.inputs]
    torch._dynamo.reset()
    try:
        with isolated_global_state(), full_float32(), torch_config.patched(torch_config.of(program, config)), \
                torch._dynamo.config.patch(use_graph_deduplication=dedup), watching(outcome.engagement):
            models = {role: _model(module, program, role == "reference").to(dev) for role in ROLES}
            fns: dict[str, Any] = {role: models[role] for role in ROLES}
            compilers = {"plain": plain_b, "graphed": graphed_b}
            for role, b in compilers.items():
                try:
                    fns[role] = torch.compile(models[role], backend=_own(b.compiler_fn()),
                                              **torch_compile_kwargs(program, run_config), **b.options)
                except Exception as e:
                    outcome.failure = failure(e, "dynamo")
                    return outcome
            roles = {role: (fns[role], models[role], compilers.get(role)) for role in ROLES}
            static: dict[str, dict[str, torch.Tensor]] = {role: {} for role in ROLES}
            pending: list[tuple[str, int, str, torch.Tensor]] = []  # (role, position, where, tensor)
            for k in range(plan.calls):
                mod = other if plan.resize and k == plan.resize.at else module
                step: list[tuple[str, int, str, torch.Tensor]] = []
                # a step is one call, or with ``twice`` two (other input values), the first after the step mark
                for second in (False, True) if plan.twice else (False,):
                    position = len(outcome.calls)
                    runs, held, shapes = _call(mod, call_seed(program, k) + second, roles, names, plan, static,
                                               mark=plan.mark_step and not second, device=dev,
                                               leaks=outcome.leaked_state)
                    outcome.calls.append(ReplayCall(position, plan.phase(k) + (":same-step" if second else ""),
                                                    shapes, runs, step=k))
                    for role, call, where, t in step:  # the first call's results, after the second
                        value, raised = read_again(t)
                        outcome.held.append(Held(call, where, value, raised, role, same_step=True))
                    if runs["graphed"].failure is not None:
                        break
                    kept = {role: snapshots(runs[role]) for role in HOLD}
                    step = [(role, position, w, t) for role in HOLD for w, t in held[role] if w in kept[role]]
                    pending += step
                for role, call, where, t in [p for p in pending if outcome.calls[p[1]].step < k]:
                    value, raised = read_again(t)
                    outcome.held.append(Held(call, where, value, raised, role))
                pending = [p for p in pending if outcome.calls[p[1]].step == k]
                if outcome.calls[-1].runs["graphed"].failure is not None:
                    break  # the calls after a crash would judge the crash again
            outcome.engagement.recorded = recorded_graphs(dev)
    finally:
        torch._dynamo.reset()
        outcome.seconds = time.perf_counter() - start
    return outcome


def _call(module, seed: int, roles: dict, names: list[str], plan: ReplayPlan, static: dict, mark: bool,
          device: torch.device, leaks: list[str]):
    """One call in every role: the runs, each held role's live results, the
    input shapes. Dispatch state a compile left behind is added to ``leaks``
    and undone before the next role runs (it would break even eager code)."""
    runs: dict[str, Optional[Execution]] = {}
    held: dict[str, list] = {role: [] for role in HOLD}
    shapes: dict[str, list[int]] = {}
    for role, (fn, model, compiler) in roles.items():
        inputs = _static(_inputs(module, seed, role == "reference", device), names, plan.static_inputs, static[role])
        shapes = {n: list(t.shape) for n, t in zip(names, inputs) if isinstance(t, torch.Tensor)}
        if role == "graphed" and mark:
            torch.compiler.cudagraph_mark_step_begin()
        for p in model.parameters():
            p.grad = None
        with backend_config(compiler):  # compiles happen at calls: each its own config
            run = execute(fn, model, inputs, names, plan.backward, hold=held.get(role))
        leaked = leaked_state()
        if leaked:
            leaks += [f"{role} call: {leak}" for leak in leaked if f"{role} call: {leak}" not in leaks]
            clean_up()
        if role == "reference" and run.failure is not None:
            run = None  # e.g. an explicit .to(torch.float32) meets float64 weights
        runs[role] = run
    return runs, held, shapes


def _own(compiler_fn):
    """A backend object of this role's own: Dynamo reuses a cache entry across
    ``torch.compile`` calls with the same backend object, and "plain" and
    "graphed" may be one compiler (inductor) under different configs."""

    def backend(gm, example_inputs):
        return compiler_fn(gm, example_inputs)

    return backend


def _static(inputs: list, names: list[str], wanted: tuple[str, ...], static: dict[str, torch.Tensor]) -> list:
    """A run's inputs: static ones are the run's first-call tensors
    (``mark_static_address``), given each later call's values in place; every
    run does the same, so eager shows what writing them in place means."""
    out = []
    for n, t in zip(names, inputs):
        if n not in wanted:
            out.append(t)
        elif n not in static:
            torch._dynamo.mark_static_address(t)
            static[n] = t
            out.append(t)
        else:
            with torch.no_grad():
                static[n].copy_(t)
            static[n].grad = None
            out.append(static[n])
    return out
