"""The staged pipeline: eager, eager again, float64 reference, then compiled.

``run_program`` returns an ``Outcome`` for any behaviour of the compiler under
test; it raises only for a program that fails in eager (a generator bug).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from dataclasses import replace
from types import ModuleType
from typing import Callable

import torch
import torch._dynamo

from generators.autograd import plain_values
from generators.codegen import compile_kwargs, render, sub_callable
from generators.ir import Program
from generators.regions import twins

from . import branches, torch_config
from .backends import resolve
from .bits import same_bits
from .sample import in_sample
from .capabilities import has
from .execute import mode_context, as_dtype, execute, failure
from .hygiene import clean_up, leaked_state
from .loader import load_source
from .observe import recording_backend, recording_guards, recording_reuse
from .structure import StructureRecorder, recording_structure, region_nodes
from .outcome import Capture, Execution, Outcome, RunConfig
from .recall import Workbench, run_variants, start_values


class InvalidProgram(RuntimeError):
    """The program fails in eager mode: it should never have been generated."""


def instantiate(module: ModuleType, program: Program, float64: bool = False, cast: str = ""):
    """The model and its inputs, seeded; and the RNG state ``make_inputs``
    started from, to make the same inputs again."""
    torch.manual_seed(program.seed)
    model = module.Program()
    rng = torch.get_rng_state()
    inputs = module.make_inputs()
    cast = "float64" if float64 else cast  # the referee, or the precision a backend computes in
    if cast:
        dtype = getattr(torch, cast)
        model, inputs = model.to(dtype), as_dtype(inputs, dtype)
    return model, inputs, rng


def low_precision(precision) -> str:
    """The least precise dtype a backend computes in (RunConfig.precision)."""
    return "float16" if any(low == "float16" for _, low in precision) else "bfloat16"


def run_eager(module: ModuleType, program: Program, config: RunConfig, float64: bool = False,
              cast: str = "") -> Execution:
    model, inputs, _ = instantiate(module, program, float64, cast)
    with isolated_global_state():
        result = execute(model, model, inputs, _input_names(program), config.backward)
    if result.failure is not None:
        raise InvalidProgram(f"program fails in eager ({result.failure.stage}): {result.failure.type}: {result.failure.message}")
    return result


def torch_compile_kwargs(program: Program, config: RunConfig) -> dict:
    """The program's own compile options, overridden by the run's."""
    kwargs = compile_kwargs(program)
    if config.fullgraph is not None:
        kwargs["fullgraph"] = config.fullgraph
    if config.dynamic is not None:
        kwargs["dynamic"] = config.dynamic
    return kwargs


def backend_config(backend):
    """The backend's inductor settings while it compiles and runs (none: nothing)."""
    if backend is None or not backend.inductor_config:
        return contextlib.nullcontext()
    import torch._inductor.config

    return torch._inductor.config.patch(backend.inductor_config)


def _sub_codes(module: ModuleType, program: Program) -> dict:
    """The code object Dynamo inlines for each call of each sub-block -> its name."""
    out = {}
    for b in program.subs:
        fn = getattr(module, sub_callable(b.name, b.kind))
        out[_unwrap(fn if b.kind == "function" else fn.forward).__code__] = b.name
    return out


def _unwrap(fn):
    """The function under its decorators: ``functools.wraps``' ``__wrapped__``,
    and ``nested_compile_region``'s ``__marked_compile_region_fn__`` (it sets
    no ``__wrapped__``: ``inspect.unwrap`` alone stops at its wrapper, whose
    code object every decorated block shares)."""
    fn = inspect.unwrap(fn)
    while hasattr(fn, "__marked_compile_region_fn__"):
        fn = inspect.unwrap(fn.__marked_compile_region_fn__)
    return fn


def _block_code(module: ModuleType):
    """The code object Dynamo inlines for each call of the program's block."""
    fn = getattr(module, "block", None) or getattr(module, "Block", None)
    if fn is None:  # function instances made by one factory share one code object
        fn = module.BLOCKS[0]
    return _unwrap(getattr(fn, "forward", fn)).__code__


def run_compiled(module: ModuleType, program: Program, config: RunConfig,
                 known: Capture | None = None) -> tuple[Execution, Capture]:
    """``known``: the capture of the same program with deduplication on, when
    this is its run without it: changed calls that can tell nothing it did
    not are skipped (harness.recall.run_variants). Each run leaves grad mode,
    the default dtype and autocast as it found them: a compile that dies
    half-way through a forward that sets one must not hand it to the run
    after it (a companion run without the pass, an unmasked rerun)."""
    with isolated_global_state():
        return _run_compiled(module, program, config, known)


# Set once this process has captured a program (Outcome.first_capture).
_CAPTURED: list[bool] = []


def _run_compiled(module: ModuleType, program: Program, config: RunConfig,
                  known: Capture | None) -> tuple[Execution, Capture]:
    _CAPTURED[:] = [True]
    capture = Capture()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    backend = resolve(config.backend)
    model, inputs, rng = instantiate(module, program)
    recorder = StructureRecorder(_block_code(module), _sub_codes(module, program)) if config.record_structure else None
    options = dict(backend.options)
    if has("guard_filter_fn"):  # else the guards go unrecorded (capabilities.unavailable says so)
        options["options"] = {**options.get("options", {}), "guard_filter_fn": recording_guards(capture)}
    with torch_config.patched(torch_config.of(program, config.torch_config)), \
            torch._dynamo.config.patch(use_graph_deduplication=config.dedup), backend_config(backend):
        with recording_structure(recorder) if recorder is not None else contextlib.nullcontext(), \
                recording_reuse(capture):
            try:
                compiled = torch.compile(
                    model,
                    backend=recording_backend(backend.compiler_fn(), capture, recorder),
                    **torch_compile_kwargs(program, config),
                    **options,
                )
            except Exception as e:
                _check_hygiene(capture)
                return Execution(failure=failure(e, "dynamo")), capture
            start = start_values(model) if config.variants else None  # the changed calls start from here
            result = execute(compiled, model, inputs, _input_names(program), config.backward)
        capture.recording = False
        if recorder is not None:
            capture.structure = recorder.graphs
            capture.region_groups = [g for record in recorder.graphs for g in region_nodes(record.groups)]
        _check_hygiene(capture)
        capture.graph_breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
        if config.variants and result.failure is None:
            bench = Workbench(module, program, model, compiled, rng, _input_names(program), config.backward, start)
            t = time.perf_counter()
            with isolated_global_state():
                run_variants(bench, config, capture, known if config.spare else None)
            capture.variant_seconds = time.perf_counter() - t
            capture.late_leaked_state = leaked_state()
            if capture.late_leaked_state:
                clean_up()
    torch._dynamo.reset()
    return result, capture


@contextlib.contextmanager
def isolated_global_state():
    """Programs set grad mode, default dtype and autocast; a crash of the
    compiler under test can leave them set. Restore them for the next program.
    A compiled graph that raises between its ``_enter_autocast`` and
    ``_exit_autocast`` also leaves autocast's nesting count up, so no later
    bracket's exit clears autocast's cache of weight casts: a later program in
    the worker read a cast another program made (seed 99's unexplained
    requires_grad finding). The count goes back, and the cache is cleared."""
    grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    autocast = torch.is_autocast_enabled("cpu")
    autocast_dtype, cache = torch.get_autocast_dtype("cpu"), torch.is_autocast_cache_enabled()
    nesting = _autocast_nesting()
    try:
        yield
    finally:
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        torch.set_autocast_enabled("cpu", autocast)
        torch.set_autocast_dtype("cpu", autocast_dtype)
        torch.set_autocast_cache_enabled(cache)
        while _autocast_nesting() > nesting:
            torch.autocast_decrement_nesting()
        if nesting == 0:
            torch.clear_autocast_cache()


def _autocast_nesting() -> int:
    """How many autocast brackets are open (torch reads it only through a change)."""
    count = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return count


def _check_hygiene(capture: Capture) -> None:
    capture.leaked_state = leaked_state()
    if capture.leaked_state:
        clean_up()


def run_program(program: Program, config: RunConfig = RunConfig()) -> Outcome:
    with isolated_global_state(), mode_context(config.mode):
        return _run_program(program, config)


def _run_program(program: Program, config: RunConfig) -> Outcome:
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    source = render(program)
    module = load_source(source)
    eager = run_eager(module, program, config)
    eager_again = run_eager(module, program, config)
    try:
        reference = run_eager(module, program, config, float64=True)
    except InvalidProgram:
        reference = None  # e.g. an explicit .to(torch.float32) meets float64 weights
    low_reference = None
    if config.precision:  # the rounding noise of the precision the backend computes in
        try:
            low_reference = run_eager(module, program, config, cast=low_precision(config.precision))
        except InvalidProgram:
            low_reference = None
    plain_eager, plain_reference = _plain_eager(program, config)
    seconds["eager"] = time.perf_counter() - t
    t = time.perf_counter()
    first_capture = not _CAPTURED
    with branches.traced():  # the feedback signal, when a campaign installed a tracer
        compiled, capture = run_compiled(module, program, config)
    seconds["compiled"] = time.perf_counter() - t - capture.variant_seconds
    if capture.variant_seconds:  # the guard oracles' changed calls, apart from the compile they re-call
        seconds["guards"] = capture.variant_seconds
    outcome = Outcome(program, config, source, eager, eager_again, reference, compiled, capture, seconds,
                      low_reference=low_reference, first_capture=first_capture, plain_eager=plain_eager,
                      plain_reference=plain_reference)
    _run_companions(outcome, module)
    return outcome


def _plain_eager(program: Program, config: RunConfig) -> tuple[Execution | None, Execution | None]:
    """Eager's runs (as is, in float64) of the program without its autograd features, where torch promises how
    the values with them relate (None: no such features, or it fails): a fault in torch's hook machinery that
    eager and the compiled run share shows against these, and against nothing else."""
    if not plain_values(program.options.autograd):
        return None, None
    plain = replace(program, options=replace(program.options, autograd=()))
    module = load_source(render(plain))
    try:
        run = run_eager(module, plain, config)
    except InvalidProgram:
        return None, None
    try:
        return run, run_eager(module, plain, config, float64=True)
    except InvalidProgram:
        return run, None


def add_companions(outcome: Outcome, names: tuple[str, ...]) -> None:
    """``names`` made next to a run made without them (a re-run that one oracle judges first and another,
    reading a companion, next), as ``run_program`` would have made them."""
    missing = tuple(n for n in names if n not in outcome.config.companions)
    if not missing:
        return
    outcome.config = replace(outcome.config, companions=(*outcome.config.companions, *missing))
    with isolated_global_state(), mode_context(outcome.config.mode):
        _run_companions(outcome, load_source(outcome.source), missing)


def _run_companions(outcome: Outcome, module: ModuleType, names: tuple[str, ...] | None = None) -> None:
    config = outcome.config
    reason = spared(config, outcome.compiled, outcome.capture, outcome.program, outcome.first_capture)
    crashed = outcome.compiled.failure is not None
    for name in config.companions if names is None else names:
        t = time.perf_counter()
        if name == "recapture" and config.spare and crashed:
            # the oracles reading it compare two captures: one crashed
            outcome.spared[name] = "the main compile failed: a second capture has nothing to be compared with"
        elif name == "dedup_off":
            _dedup_off(outcome, module, reason)
        elif name in SPARED and reason:
            outcome.spared[name] = reason
        elif name == "recapture" and (why := recapture_sampled_out(config, outcome.program, outcome.first_capture)):
            outcome.spared[name] = why
        elif name in PROGRAM_COMPANIONS:
            _run_program_companion(outcome, module, name)
        elif name not in outcome.companions:
            outcome.companions[name] = run_compiled(module, outcome.program,
                                                    replace(COMPANIONS[name](config, outcome.program, outcome.capture), companions=()))
        outcome.seconds[name] = time.perf_counter() - t


def _dedup_off(outcome: Outcome, module: ModuleType, reason: str) -> None:
    """The program without deduplication (the ``dedup_off`` companion), unless a program companion made it
    already: where ``reason`` (``spared``) says it would be the same compile, the main run itself."""
    if "dedup_off" in outcome.companions:
        return
    if reason:
        outcome.spared["dedup_off"] = reason
        outcome.companions["dedup_off"] = (outcome.compiled, outcome.capture)
        return
    config = replace(COMPANIONS["dedup_off"](outcome.config, outcome.program, outcome.capture), companions=())
    outcome.companions["dedup_off"] = run_compiled(module, outcome.program, config, known=_known(outcome))


# A second capture is made in one program in RECAPTURE_EVERY (harness.sample). Of
# its two readers, the determinism oracle has never failed on a real torch
# (its planted fault needs the recapture to meet an odd call of the tracker
# anyway), and dedup_toggle's guard comparison reads it only because a
# process's first compile may install guards of its own: every later main
# capture is compared as it is (guards of the main capture and of a second
# one were the same for every program of a 40-program campaign, first ones
# included, on torch 2.13). Costly (a Dynamo trace) and rarely decisive.
RECAPTURE_EVERY = 4


def recapture_sampled_out(config: RunConfig, program: Program, first_capture: bool) -> str:
    """Why no second capture is made ("": one is): outside the sample, where
    the main compile was not this process's first."""
    if not config.spare or first_capture or in_sample(program, RECAPTURE_EVERY, "recapture"):
        return ""
    return (f"captured twice in one program in {RECAPTURE_EVERY} (harness.pipeline.RECAPTURE_EVERY); "
            "the guards compared are the main capture's")


def _known(outcome: Outcome) -> Capture | None:
    """What the run without deduplication may lean on: the capture with it,
    where its first call ran (harness.recall: needless and sampled-out calls)."""
    return outcome.capture if outcome.compiled.failure is None else None


def spared(config: RunConfig, compiled: Execution, capture: Capture, program: Program | None = None,
           first_capture: bool = False) -> str:
    """Why a compile with deduplication off, or a second capture, could tell
    nothing that this one did not ("": they could): the pass is off, or it
    grouped nothing (no region group, no ``invoke_subgraph`` call in any graph
    the backend got, later recompiles included) in a run where nothing
    failed. Dynamo with deduplication on differs from it off only by the
    tracker's bookkeeping and the pass, so such a compile is the compile
    without it (``suites/test_spared.py`` checks this over drawn programs).
    One ``program`` in AUDIT_EVERY (harness.sample) is compiled again anyway: a pass
    under test that misbehaves without grouping anything (a guard of its own)
    is still found, later; and so is a process's first program
    (``first_capture``), so that such a pass, which touches every program, is
    met on a worker's first one for one compile a worker."""
    if not config.spare or (program is not None and config.dedup
                            and (first_capture or in_sample(program, AUDIT_EVERY, "audit"))):
        return ""
    if not config.dedup:
        return "deduplication is off in the main run: it is its own run without the pass"
    failed = compiled.failure is not None or any(
        r.compiled is not None and r.compiled.failure is not None for r in capture.variants)
    if failed or capture.invoke_subgraph_calls or capture.late_invoke_subgraph_calls or capture.region_groups:
        return ""
    return "the pass grouped nothing: the compile without it is the same compile"


def without_dedup(outcome: Outcome, config: RunConfig) -> Outcome:
    """The program run as ``config`` with deduplication off, reusing the
    compile without deduplication that ``outcome`` already made (its
    ``dedup_off`` companion) and its eager runs; a fresh run when it has none."""
    off = outcome.companions.get("dedup_off")
    config = replace(config, dedup=False)
    # A spared run is its own run without the pass only for a pass that does
    # nothing when it groups nothing: blame needs the real compile without it
    # (a pass under test may break graphs it groups nothing in).
    # Changed calls it skipped as needless next to the run with the pass are
    # needed where the run without it is judged on its own.
    if off is None or not outcome.config.dedup or "dedup_off" in outcome.spared \
            or (config.variants and any(r.skipped for r in off[1].variants)):
        return run_program(outcome.program, config)
    suffix = ":dedup_off"  # twins compiled without deduplication serve as its twins
    made = {k.removesuffix(suffix): v for k, v in outcome.companions.items() if k.endswith(suffix)}
    with isolated_global_state():
        again = Outcome(outcome.program, config, outcome.source, outcome.eager, outcome.eager_again, outcome.reference,
                        off[0], off[1], {"eager": 0.0, "compiled": 0.0}, companions=made)
        _run_companions(again, load_source(outcome.source))
    return again


def run_fresh(program: Program, config: RunConfig, variant: dict, first_call: bool = False) -> Execution:
    """The program compiled anew and called under ``variant`` (a
    ``Variant.to_dict()``): its first call when ``first_call`` is False (what
    an entry compiled for the change computes), else after a first call on
    the program's own inputs (what the entry of that call, if its guards let
    it, computes for the change). Tells a stale entry (a fresh one is right)
    from a wrong compile the change only revealed (a fresh one is as wrong)."""
    from generators.variants import REPEAT, Variant

    module = load_source(render(program))
    backend = resolve(config.backend)
    with isolated_global_state():
        torch._dynamo.reset()
        model, _, rng = instantiate(module, program)
        with torch_config.patched(torch_config.of(program, config.torch_config)), \
                torch._dynamo.config.patch(use_graph_deduplication=config.dedup), backend_config(backend):
            try:
                compiled = torch.compile(model, backend=backend.compiler_fn(),
                                         **torch_compile_kwargs(program, config), **backend.options)
            except Exception as e:
                return Execution(failure=failure(e, "dynamo"))
            bench = Workbench(module, program, model, compiled, rng, _input_names(program), config.backward)
            for change in ([REPEAT] if first_call else []) + [Variant.from_dict(variant)]:
                with bench.applied(change) as (inputs, kwargs):
                    result = execute(compiled, model, inputs, bench.names, bench.backward, kwargs)
                if result.failure is not None:
                    break
        torch._dynamo.reset()
        if leaked_state():
            clean_up()
    return result


def rerun(outcome: Outcome, program: Program, config: RunConfig) -> Outcome:
    """``run_program(program, config)``, reusing what ``outcome`` compiled
    where it is the same run (the same program without deduplication)."""
    if program == outcome.program and config == replace(outcome.config, dedup=False):
        return without_dedup(outcome, config)
    return run_program(program, config)


def _run_program_companion(outcome: Outcome, module: ModuleType, name: str) -> None:
    """The twins ``PROGRAM_COMPANIONS[name]`` makes of the program, each
    compiled on the run's backend as ``name:label``; when the main run
    deduplicates, also without deduplication as ``name:label:dedup_off``, next
    to the program itself without deduplication (``dedup_off``, shared with
    the companion of that name). No twins: nothing runs. Where the program
    itself crashed in Dynamo its twins are not compiled (nothing to compare
    them with)."""
    program, config = outcome.program, outcome.config
    made = PROGRAM_COMPANIONS[name](program)
    if not made:
        return
    if config.dedup and "dedup_off" not in outcome.companions:
        _dedup_off(outcome, module, spared(config, outcome.compiled, outcome.capture, program, outcome.first_capture))
    # The twins are other programs: no changed re-calls, no pass recorder.
    plain = replace(config, companions=(), variants=0, record_structure=False)
    sides = [("", outcome.compiled, plain)]
    if config.dedup:
        sides.append((":dedup_off", outcome.companions["dedup_off"][0], replace(plain, dedup=False)))
    for label, twin in made:
        twin_module = None
        for suffix, original, twin_config in sides:
            if (original.failure is not None and original.failure.stage == "dynamo") \
                    or f"{name}:{label}{suffix}" in outcome.companions:
                continue
            reason = twin_spared(config, program, original, outcome.eager)
            if reason:
                outcome.spared[f"{name}:{label}{suffix}"] = reason
                continue
            twin_module = twin_module or load_source(render(twin))
            on = outcome.companions.get(f"{name}:{label}")
            if suffix and on is not None and spared(replace(twin_config, dedup=True), *on, twin):
                outcome.companions[f"{name}:{label}{suffix}"] = on  # the twin grouped nothing: the same compile
            else:
                outcome.companions[f"{name}:{label}{suffix}"] = run_compiled(twin_module, twin, twin_config)


def twin_spared(config: RunConfig, program: Program, original: Execution, eager: Execution) -> str:
    """Why a twin need not be compiled next to ``original`` ("": it must): a
    twin is the expectation the original is judged against, with eager as
    referee where they disagree (oracles.compile_region). An original that
    computed eager's very bits can only agree with its twin, or stand next to
    a twin that is wrong itself: a bug of the twin's own compile, which the
    oracles judge on programs like the twin, never of the original. One
    ``program`` in AUDIT_EVERY (harness.sample) compiles its twins anyway, so a
    twin's own crash is still met, later."""
    if not config.spare or in_sample(program, AUDIT_EVERY, "audit"):
        return ""
    if same_bits(original, eager):
        return "the original computed eager's bits: its twin can only agree, or be wrong itself"
    return ""


# Companions a run grouping nothing spares (see ``spared``), but in one
# program in AUDIT_EVERY.
SPARED = ("dedup_off", "recapture")
AUDIT_EVERY = 8

# Extra compiles of the same program that oracles compare the main run with.
COMPANIONS: dict[str, Callable[[RunConfig, Program, Capture], RunConfig]] = {
    # the same backend without the pass (oracles.dedup_toggle; oracles.guards
    # compares the variants' recompiles)
    "dedup_off": lambda c, p, cap: replace(c, dedup=False),
    # a second capture (its compiled code decides which frames recompile),
    # forward only (oracles.determinism; oracles.dedup_toggle's guards): what
    # it reads is Dynamo's, decided before any backend sees a graph, so the
    # backend is "eager" where nothing the backend computes can reach Dynamo:
    # one frame, no graph break (else a value handed across a break, an
    # .item(), is baked into the next graph), and no symbolic shape (a
    # backend's own tracing may add shape guards)
    "recapture": lambda c, p, cap: replace(c, backward=False, variants=0,
                                           backend="eager" if _backend_blind(p, c, cap) else c.backend),
}


def _backend_blind(program: Program, config: RunConfig, capture: Capture) -> bool:
    return capture.frames == 1 and not capture.graph_breaks and not _symbolic(program, config)


def _symbolic(program: Program, config: RunConfig) -> bool:
    return bool(config.dynamic or program.options.dynamic or program.options.mark_dynamic)


def region_twins(program: Program) -> list[tuple[str, Program]]:
    """At most two twins of a program with a ``nested_compile_region`` block
    (``generators.regions.twins``): the decorator removed, and moved one level
    (one of the possible moves, chosen by the program's seed); none without one."""
    made = twins(program)
    if not made:
        return []
    removed, moved = made[0], made[1:]
    return [removed, *([moved[program.seed % len(moved)]] if moved else [])]


# Extra compiles of *other* programs, made from the program: a companion name
# maps to its twins, (label, program) each, run as "<name>:<label>" (and
# "<name>:<label>:dedup_off"; see _run_program_companion).
PROGRAM_COMPANIONS: dict[str, Callable[[Program], list[tuple[str, Program]]]] = {
    # the decorator removed or moved (oracles.compile_region)
    "region": region_twins,
}


def _input_names(program: Program) -> list[str]:
    return [n for n, _ in program.inputs]
