"""Re-call a compiled program after one change at a time (guard checking).

After the first call, each of the generator's variants (``generators.variants``)
is applied to the same model and the same compiled function, which is called
again; eager (twice: the nondeterminism gate) and float64 eager run on the
same change. Around the call the harness asks Dynamo's cache directly: does
the entry that compiled the original call accept this one (``check_verbose``
on its guard manager, with the frame's arguments), which entry would serve it,
did the call recompile and why (Dynamo's own recompile reasons). Every run
starts from the same model values, the same inputs (the RNG state
``make_inputs`` started from) and the same seed, and ``undo`` restores what
the change touched, so variants are independent of each other.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import types
from types import ModuleType
from typing import Any, Callable, Iterator, Optional

import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from generators.ir import Program
from generators.variants import PRELUDE, REPEAT, Variant, change_key, select

from .capabilities import recompile_limit_name
from .execute import as_float64, autograd_of, execute
from .observe import recording_recompiles
from .outcome import Capture, Execution, RunConfig, VariantRun
from .sample import in_sample

GUARD_TEXT_LIMIT = 6000
# Changes that change nothing in a mode: grad mode switched off (and back on,
# which would undo the run's own no_grad) where the run is forward-only.
MEANINGLESS: dict[str, tuple[str, ...]] = {
    "no_grad": ("state:grad",),
    "inference_mode": ("state:grad", "state:inference"),
}


def _entries(code) -> list[Any]:
    return list(_debug_get_cache_entry_list(code))


def _frame_locals(model: torch.nn.Module, inputs: list, kwargs: dict) -> dict[str, Any]:
    bound = inspect.signature(type(model).forward).bind(model, *inputs, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _failing_guards(entry: Any, frame: dict[str, Any]) -> list[str]:
    """The guards of ``entry`` that reject ``frame``, as Dynamo words them."""
    verdict = entry.guard_manager.check_verbose(frame)
    return [] if verdict.result else [p.split("#")[0].strip() or p for p in verdict.verbose_code_parts] or ["?"]


def start_values(model: torch.nn.Module) -> dict:
    """The model's parameters and buffers as they are now (a copy): where every run of a Workbench starts."""
    return {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()}


class Workbench:
    """One model and its compiled function, and how to run either from the
    same starting point under a variant."""

    def __init__(self, module: ModuleType, program: Program, model: torch.nn.Module, compiled: Callable,
                 rng: torch.Tensor, input_names: list[str], backward: bool, values: Optional[dict] = None):
        """``values``: the model's state before its first call (``start_values``), where that call was made
        already: a buffer the first call wrote in place (batch norm's running stats) must start every run
        from where the first call started, as eager's run the oracles compare with did."""
        self.module, self.program, self.model, self.compiled = module, program, model, compiled
        self.rng = rng  # the state make_inputs started from (harness.pipeline.instantiate)
        self.names, self.backward = input_names, backward
        self.values = values if values is not None else start_values(model)
        self.ns = module.__dict__  # variants rebind the program's globals
        exec(PRELUDE, self.ns)
        self.code = type(model).forward.__code__

    def _reset(self) -> None:
        with torch.no_grad():
            for k, v in self.model.state_dict(keep_vars=True).items():
                if k in self.values and v.shape == self.values[k].shape:
                    v.copy_(self.values[k])
        for p in self.model.parameters():
            p.grad = None

    @contextlib.contextmanager
    def applied(self, variant: Variant) -> Iterator[tuple[list, dict]]:
        self._reset()
        torch.set_rng_state(self.rng)
        self.ns.update(model=self.model, inputs=self.module.make_inputs(), kwargs={})
        exec("\n".join(variant.apply), self.ns)
        try:
            yield self.ns["inputs"], self.ns["kwargs"]
        finally:
            exec("\n".join(variant.undo), self.ns)
            self._reset()

    @contextlib.contextmanager
    def as_called(self) -> Iterator[None]:
        """The program's own state as a call finds it at its frame's entry (harness.execute): its autograd
        trace cleared, its autograd context entered. A guard of the frame may read them (a global module hook
        registered by the context, the length of the trace a hook appends to); asked between calls, they are
        not what the call saw."""
        trace, context, _ = autograd_of(self.model)
        trace.clear()
        try:
            with context():
                yield
        finally:
            trace.clear()

    def run(self, variant: Variant, float64: bool = False) -> Execution:
        """Eager under ``variant`` (in float64: on a double copy of the model)."""
        with self.applied(variant) as (inputs, kwargs):
            model = self.model
            if float64:
                model, inputs = copy.deepcopy(self.model).double(), as_float64(inputs)
            return execute(model, model, inputs, self.names, self.backward, kwargs)

    def original_entry(self, capture: Capture) -> Optional[Any]:
        """The cache entry that serves the original call again (the first
        accepting one); records whether there is one, and if not, why."""
        with self.applied(REPEAT) as (inputs, kwargs), self.as_called():
            frame = _frame_locals(self.model, inputs, kwargs)
            entries = _entries(self.code)
            found = next((e for e in entries if e.guard_manager.check(frame)), None)
            capture.original_accepts_original = None if not entries else found is not None
            if entries and found is None:
                capture.original_rejects_because = _failing_guards(entries[-1], frame)
            return found


def needless(run: Optional[VariantRun], same_guards: bool) -> str:
    """Why calling a change again without deduplication can tell nothing
    that ``run`` (the call with it) did not ("": it can): the change reached
    no guard of the frame (served by the first call's entry, whose guards
    are those of the entry without deduplication), or its recompile grouped
    nothing (the pass did nothing: the same compile, harness.pipeline.spared)."""
    if run is None or run.invalid or run.compiled is None or run.compiled.failure is not None:
        return ""
    if not run.recompiled and run.served_by_original and same_guards:
        return "it reached no guard of the frame with deduplication, whose guards are the same"
    if run.recompiled and not run.grouped:
        return "its recompile with deduplication grouped nothing: the same compile"
    if run.recompiled and not run.symbolic and same_guards:
        return ("its recompile traced no symbolic value, under guards the same either way: the pass, which "
                "runs after tracing, has no shape to guard")
    return ""


# Without deduplication, a changed call that can tell something is compared
# with its call with deduplication (oracles.guards: the same recompiles, the
# same new guards) in one program in OFF_CALLS_EVERY (harness.sample), where the first
# call with deduplication ran. That comparison is the costliest rarely decisive
# part of a run (a fifth of its compile time) and it has never failed on a
# real torch; no planted fault is first found by it. Where the first call with
# deduplication failed, the calls without it are the guard oracles' only ones:
# always made.
OFF_CALLS_EVERY = 4


def sampled_out(program: Program, known: Optional[Capture]) -> str:
    """Why this run without deduplication makes no changed call ("": it
    makes them); ``known`` is None where the first call with it failed."""
    if known is None or in_sample(program, OFF_CALLS_EVERY, "off_calls"):
        return ""
    return (f"compared with the calls with deduplication in one program in {OFF_CALLS_EVERY} "
            "(harness.recall.OFF_CALLS_EVERY)")


def run_variants(bench: Workbench, config: RunConfig, capture: Capture, known: Optional[Capture] = None) -> None:
    """Run the selected variants; results go to ``capture.variants``.
    ``known``: the same program's capture with deduplication on, when this
    run is without it: changes that can tell nothing are skipped (``needless``),
    and all of them outside the sample (``sampled_out``)."""
    original = bench.original_entry(capture)
    if capture.original_accepts_original is None:
        # The called frame has no cache entry (Dynamo skipped it: it runs eagerly), so the frames it calls compile
        # as they are first reached, which may be on a later call (one compiled under inference mode only, reached
        # under grad mode the next time). The same call once more first, so no change is blamed for those.
        with bench.applied(REPEAT) as (inputs, kwargs):
            execute(bench.compiled, bench.model, inputs, bench.names, bench.backward, kwargs)
    same_guards = known is not None and sorted(known.guards) == sorted(capture.guards)
    before = {str(r.variant): r for r in known.variants} if known is not None else {}
    # An entry compiled for one change may serve a later one (two objects
    # alike enough): where that happened with deduplication, every recompile
    # is needed without it too, or the later call would find no such entry.
    if any(r.compiled is not None and not r.recompiled and not r.served_by_original
           for r in (known.variants if known is not None else [])):
        before = {k: r for k, r in before.items() if not r.recompiled}
    reasons: list[str] = []
    chosen = [v for v in select(bench.program, -1 if config.changes else config.variants)
              if v.kind not in MEANINGLESS.get(config.mode, ())
              and not (v.dtype and config.dtypes and v.dtype not in config.dtypes)
              and (not config.changes or change_key(v) in config.changes)]
    # Each change may add an entry: Dynamo's recompile limit (8) is about
    # programs that recompile without end, not about this many deliberate changes.
    name = recompile_limit_name()  # cache_size_limit in torch 2.6
    limit = getattr(torch._dynamo.config, name) + len(chosen)
    out_of_sample = sampled_out(bench.program, known)
    whys = [out_of_sample or needless(before.get(str(v.to_dict())), same_guards) for v in chosen]
    # A recompile is history for every later one: automatic dynamic makes a
    # value that changed in it symbolic in the next (an int argument changed
    # to a float is guarded by its type from then on). A change that
    # recompiled with deduplication is called without it too wherever a later
    # change is called, or that change recompiles from another history and
    # gets other guards for that reason alone.
    called_later = False
    for i in reversed(range(len(chosen))):
        known_run = before.get(str(chosen[i].to_dict()))
        if whys[i] and called_later and known_run is not None and known_run.recompiled:
            whys[i] = ""
        called_later = called_later or not whys[i]
    history: list = []  # the changes called so far that recompiled: each later call meets their entries
    with recording_recompiles(reasons), torch._dynamo.config.patch(**{name: limit}):
        for variant, why in zip(chosen, whys):
            run = VariantRun(variant.to_dict(), skipped=why) if why else \
                _run_one(bench, variant, original, capture, reasons)
            run.before = list(history)
            if run.recompiled and run.compiled is not None:
                history.append((list(variant.apply), list(variant.undo)))
            capture.variants.append(run)


def _run_one(bench: Workbench, variant: Variant, original: Any, capture: Capture, reasons: list[str]) -> VariantRun:
    run = VariantRun(variant.to_dict())
    try:
        run.eager = bench.run(variant)
    except Exception as e:  # the change itself could not be applied
        run.invalid = f"applying it raised {type(e).__name__}: {e}"
        return run
    if run.eager.failure is not None:
        run.invalid = f"eager fails under it: {run.eager.failure.type}: {run.eager.failure.message}"
        return run
    run.eager_again = bench.run(variant)
    try:
        run.reference = bench.run(variant, float64=True)
        if run.reference.failure is not None:
            run.reference = None
    except Exception:  # e.g. a program that cannot run in float64
        run.reference = None
    with bench.applied(variant) as (inputs, kwargs):
        frame = _frame_locals(bench.model, inputs, kwargs)
        entries = _entries(bench.code)
        with bench.as_called():
            serving = next((e for e in entries if e.guard_manager.check(frame)), None)
            if original is not None:
                run.original_rejects_because = _failing_guards(original, frame)
        if original is not None:
            run.original_accepts = not run.original_rejects_because
            run.served_by_original = serving is original
        if serving is not None:
            run.guards = str(serving.guard_manager)[:GUARD_TEXT_LIMIT]
        compiles, n_reasons, n_guards = capture.late_compiles, len(reasons), len(capture.late_guards)
        calls, symbolic = capture.late_invoke_subgraph_calls, capture.late_symbolic
        run.compiled = execute(bench.compiled, bench.model, inputs, bench.names, bench.backward, kwargs)
        run.recompiled = capture.late_compiles > compiles or len(reasons) > n_reasons or \
            len(_entries(bench.code)) > len(entries)
        run.recompile_reasons = reasons[n_reasons:]
        run.grouped = capture.late_invoke_subgraph_calls > calls
        run.symbolic = capture.late_symbolic > symbolic
        run.new_guards = capture.late_guards[n_guards:]
        added = [e for e in _entries(bench.code) if all(e is not old for old in entries)] if run.recompiled else []
    if added and run.compiled.failure is None:
        run.reverse = run_reverse(bench, added)
    return run


def run_reverse(bench: Workbench, added: list) -> Optional[Execution]:
    """The first of ``added`` (entries a change's recompile made) whose guards accept the call without the
    change, called on it with its own code, Dynamo off for the frames it resumes in (they run eagerly): what
    that entry would compute were it tried first. An entry must be right for every frame its guards accept
    (Dynamo tries entries in an order of its own); None where none accepts it or the entry closes over cells.
    An entry Dynamo invalidated (its code gone: an object its guards held died) is no candidate."""
    with bench.applied(REPEAT) as (inputs, kwargs):
        frame = _frame_locals(bench.model, inputs, kwargs)
        with bench.as_called():
            accepting = next((e for e in added if e.code is not None and not e.code.co_freevars
                              and e.guard_manager.check(frame)), None)
        if accepting is None:
            return None
        forward = type(bench.model).forward
        fn = types.FunctionType(accepting.code, bench.ns, forward.__name__, forward.__defaults__)
        fn.__kwdefaults__ = forward.__kwdefaults__
        entry = torch._dynamo.disable(fn)
        return execute(lambda *a, **k: entry(bench.model, *a, **k), bench.model, inputs, bench.names,
                       bench.backward, kwargs)
