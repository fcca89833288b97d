"""Run a program through its door (``generators.doors``): eager through the
door twice (the nondeterminism gate), float64 eager through it (the
referee), and the compiled program through it, deduplication as the run
asks. A run of its own, next to the main pipeline's, as CUDA-graph replays
are; ``oracles.door`` judges it.

Eager is the door applied to the eager model (a function transform of it,
its checkpointed calls) or, where the door's operator compiles even in
eager (``torch.cond`` and its kin), the plain-Python equivalent; the
operator's own eager run is kept too (``DoorCall.door_eager``). A program
the door cannot carry in eager (``vmap`` of an in-place write, ``cond`` of
a block that mutates) is refused, never judged; so is one the door's
compiler declines by design (``REFUSALS``: a graph break under strict
export, a data-dependent guard). The harness records; it never decides.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import torch
import torch._dynamo

from generators.codegen import render
from generators.doors import DOORS, Door
from generators.ir import Program
from generators.variants import grown_batch

from . import torch_config
from .backends import resolve
from .capabilities import BY_NAME, has
from .door_calls import DOOR_COMPILE, DOOR_CONFIG, door_mark, door_through
from .execute import mode_context, execute, failure
from .hygiene import clean_up, leaked_state
from .loader import load_source
from .observe import recording_backend
from .outcome import Capture, Execution, Failure, RunConfig
from .pipeline import backend_config, instantiate, isolated_global_state, torch_compile_kwargs

# Exception types (by qualified name) by which a door's compiler says it does
# not take this program, by design: refusals, counted apart, never crashes.
# Every door: a graph break the door brings where the program asks fullgraph,
# or inside an operator that must capture its body whole (vmap, cond, ...).
REFUSED_BY_ALL = ("Unsupported", "UncapturedHigherOrderOpError")
REFUSALS = {
    "export": ("UserError", "GuardOnDataDependentSymNode", "ConstraintViolationError",
               "PendingUnbackedSymbolNotFound"),
    "dynamic": ("ConstraintViolationError",),
}
# What a door's compiler says, in its own words, when it declines by design.
REFUSED_SAYING = {
    # inductor's activation-checkpoint rematerialization: RNG ops in a recompute region are unsupported
    "checkpoint": ("does not support RNG ops in recompute regions",),
}


@dataclass
class DoorCall:
    """One call through the door; the same inputs for every role."""

    label: str  # "first"; "resized" (the batch dimension grown)
    eager: Optional[Execution] = None
    eager_again: Optional[Execution] = None
    reference: Optional[Execution] = None  # float64
    compiled: Optional[Execution] = None
    door_eager: Optional[Execution] = None  # the door's operator run eagerly, where eager is its Python equivalent
    cold: Optional[Execution] = None  # cache:warm: the compile that filled the cache


@dataclass
class DoorOutcome:
    program: Program
    config: RunConfig
    door: str
    source: str
    calls: list[DoorCall] = field(default_factory=list)
    refused: str = ""  # why the door does not carry this program (nothing is judged)
    forward_only: str = ""  # why gradients through the door are not compared
    frames: int = 0  # graphs the backend got
    invoke_subgraph: int = 0  # invoke_subgraph calls in them (export: in the exported graph)
    facts: dict[str, Any] = field(default_factory=dict)  # cache counters, ...
    seconds: float = 0.0

    @property
    def backend(self) -> str:
        return self.config.backend


class _Refused(Exception):
    pass


def unavailable(door: str) -> str:
    """Why this torch cannot take ``door`` ("": it can): harness.capabilities asks it."""
    name = f"door:{door}"
    return "" if has(name) else BY_NAME[name].lost


def available() -> tuple[str, ...]:
    """The doors this torch has."""
    return tuple(d for d in DOORS if not unavailable(d))


# --- the run ----------------------------------------------------------------


def door_backend(door: Door, config: RunConfig) -> str:
    return "inductor" if door.inductor else config.backend


def run_door(program: Program, config: RunConfig) -> DoorOutcome:
    """``program`` through ``program.options.door``, compiled as ``config`` says."""
    door = DOORS[program.options.door]
    backend = door_backend(door, config)
    if backend != config.backend:  # inductor keeps a door's promise: at its own precision
        config = replace(config, backend=backend, precision=())
    source = render(program)
    run = DoorOutcome(program, config, door.name, source)
    started = time.perf_counter()
    why = unavailable(door.name)
    if why:
        run.refused = f"unavailable on this torch: {why}"
        return run
    with isolated_global_state(), mode_context(config.mode):
        try:
            _run(run, door, load_source(source), load_source(render(program, reference=True)) if door.reference else None)
        except _Refused as e:
            run.refused = str(e)
        finally:
            torch._dynamo.reset()
            if leaked_state():
                clean_up()
    run.seconds = time.perf_counter() - started
    return run


def _inputs_modules(program: Program, door: Door) -> list[tuple[str, Any]]:
    """The modules whose ``make_inputs`` build each call's inputs: the program's
    own (None); for a door that resizes, also the first grown batch the model takes."""
    out: list[tuple[str, Any]] = [("first", None)]
    grown = grown_batch(program) if door.resize else None
    if grown is not None:
        out.append(("resized", load_source(render(grown))))
    return out


def _role(run: DoorOutcome, door: Door, module, float64: bool, calls: list, backward: bool,
          compile_fn: Optional[Callable] = None, exported: Optional[list] = None) -> list[Execution]:
    """Every call through the door, one after another on one model (as a user
    calls it): eager when ``compile_fn`` is None. Raises what compiling raises."""
    program = run.program
    model, inputs, _ = instantiate(module, program, float64)
    if compile_fn is not None:
        door_mark(door.name, inputs)
    fn, owner, inputs, extra = door_through(door.name, model, inputs, compile_fn, exported)
    names = [*_names(program), *extra]
    results = [execute(fn, owner, inputs, names, backward)]
    for _, inputs_module in calls[1:]:
        if results[-1].failure is not None:
            break
        _, grown, _ = instantiate(inputs_module, program, float64)  # made as the first call's were
        results.append(execute(fn, owner, [*grown, *inputs[len(grown):]], names, backward))
    return results


def _run(run: DoorOutcome, door: Door, module, reference_module) -> None:
    backward = run.config.backward and door.backward
    eager_module = reference_module or module
    calls = _inputs_modules(run.program, door)
    # The door must carry the program in eager, forward and (where asked) backward.
    eager = _role(run, door, eager_module, False, calls, backward)
    if eager[0].failure is not None and backward and eager[0].failure.stage == "backward":
        run.forward_only = f"{eager[0].failure.type}: {eager[0].failure.message}"[:300]
        backward = False
        eager = _role(run, door, eager_module, False, calls, backward)
    if eager[0].failure is not None:
        raise _Refused(f"eager through {door.name} fails: {eager[0].failure.type}: {eager[0].failure.message}"[:400])
    # a grown batch the door does not carry: the first call alone is judged
    calls = calls[:len([e for e in eager if e.failure is None])]
    again = _role(run, door, eager_module, False, calls, backward)
    try:
        reference: list = _role(run, door, eager_module, True, calls, backward)
    except Exception:
        reference = []
    door_eager: list = []
    if reference_module is not None:
        door_eager = _role(run, door, module, False, calls, backward)
        bad = next((e.failure for e in door_eager if e.failure is not None), None)
        if bad is not None:
            raise _Refused(f"{door.name} fails in eager: {bad.type}: {bad.message}"[:400])
    for k, (label, _) in enumerate(calls):
        ref = reference[k] if k < len(reference) and reference[k].failure is None else None
        run.calls.append(DoorCall(label, eager[k], again[k] if k < len(again) else None, ref,
                                  door_eager=door_eager[k] if door_eager else None))
    if door.family == "cache":
        _cached(run, door, module, backward)
    else:
        _compiled(run, door, module, backward, calls)


def _names(program: Program) -> list[str]:
    return [n for n, _ in program.inputs]


@contextlib.contextmanager
def _compiling(run: DoorOutcome, door: Door):
    """A compile function for the run's backend (its graphs counted), under
    the run's settings and the door's."""
    config = run.config
    backend = resolve(config.backend)
    patches = (*torch_config.of(run.program, config.torch_config), *DOOR_CONFIG.get(door.name, {}).items())
    with torch_config.patched(patches), torch._dynamo.config.patch(use_graph_deduplication=config.dedup), \
            backend_config(backend):
        capture = Capture()
        kwargs = {**torch_compile_kwargs(run.program, config), **DOOR_COMPILE.get(door.name, {})}

        def compile_fn(m):
            return torch.compile(m, backend=recording_backend(backend.compiler_fn(), capture, None), **kwargs,
                                 **backend.options)

        yield compile_fn
        run.frames += capture.frames
        run.invoke_subgraph += capture.invoke_subgraph_calls + capture.late_invoke_subgraph_calls


def _compiled(run: DoorOutcome, door: Door, module, backward: bool, calls: list) -> None:
    torch._dynamo.reset()
    exported: list = []
    with _compiling(run, door) as compile_fn:
        try:
            results = _role(run, door, module, False, calls, backward, compile_fn, exported)
        except Exception as e:  # export (the compile of an export door) raised
            _refuse_or_record(run, door, failure(e, "dynamo"))
            return
    run.invoke_subgraph += sum(n.target is torch.ops.higher_order.invoke_subgraph
                               for ep in exported for n in ep.graph.nodes)
    for call, result in zip(run.calls, results):
        call.compiled = result
        if result.failure is not None:
            _refuse_or_record(run, door, result.failure, call)
            break


def _refuse_or_record(run: DoorOutcome, door: Door, f: Failure, call: Optional[DoorCall] = None) -> None:
    """A failure of the door's compiler: a refusal by design, or a crash of ``call`` (default: the first)."""
    names = (*REFUSED_BY_ALL, *REFUSALS.get(door.family, ()))
    if any(f.type == n or f.type.endswith("." + n) for n in names) or any(
            f"{n}:" in f.message or f"{n}(" in f.message for n in names) or any(
            words in f.message for words in REFUSED_SAYING.get(door.family, ())):
        raise _Refused(f"{door.name} declines: {f.type}: {f.message}"[:400])
    (call or run.calls[0]).compiled = Execution(failure=f)


def _cached(run: DoorOutcome, door: Door, module, backward: bool) -> None:
    """Compile cold into a private cache folder, forget everything in memory,
    compile again warm: the warm run is the one judged; the cold one, and
    the cache counters of both, are kept."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters

    with tempfile.TemporaryDirectory(prefix="door-cache-") as folder, \
            _env("TORCHINDUCTOR_CACHE_DIR", folder), \
            inductor_config.patch(fx_graph_cache=True, fx_graph_remote_cache=False), \
            functorch_config.patch(enable_autograd_cache=True):
        results = []
        for phase in ("cold", "warm"):
            torch._dynamo.reset()
            _forget_in_memory()
            counters.clear()
            with _compiling(run, door) as compile_fn:
                result = _role(run, door, module, False, [("first", None)], backward, compile_fn)[0]
            run.facts[phase] = {f"{cache}_{what}": counters[group][f"{cache}_{what}"]
                                for group, cache, whats in CACHE_COUNTERS for what in whats}
            results.append(result)
            if result.failure is not None:
                break
    run.calls[0].cold = results[0]
    run.calls[0].compiled = results[-1]
    if results[-1].failure is not None:
        _refuse_or_record(run, door, results[-1].failure)


# The counters torch keeps of its compile caches: what a cold compile stored,
# what a warm one found.
CACHE_COUNTERS = (
    ("inductor", "fxgraph_cache", ("hit", "miss", "bypass", "pickle_error", "write_error")),
    ("aot_autograd", "autograd_cache", ("hit", "miss", "bypass", "saved")),
)


def _forget_in_memory() -> None:
    """What a second process would not have: inductor's in-memory caches of compiled code."""
    try:
        from torch._inductor.codecache import PyCodeCache

        PyCodeCache.cache_clear()
    except Exception:
        pass


@contextlib.contextmanager
def _env(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
