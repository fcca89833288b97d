"""Any ``nn.Module`` through the pipeline, not only generated programs.

A *factory* (``package.module:name`` or ``path/to/file.py:name``) takes no argument and returns
``(model, inputs)``: the model, and its example inputs as a dict of keyword
arguments or a tuple of positional ones (or a callable making either). Every
run builds the model afresh from the factory under one seed, so the eager
runs, the float64 referee and each compile start from the same weights.
``run_model`` returns an ``Outcome`` like ``harness.pipeline.run_program``'s,
with no program: completeness reads the layers alike instead
(``harness.model_state``), the guard oracles the changes of
``harness.model_changes``; compile_region does not apply (``MODEL_ORACLES``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import sys
import time
from pathlib import Path
from dataclasses import replace
from typing import Any, Callable

import torch
import torch._dynamo

from . import torch_config
from .backends import resolve
from .capabilities import has
from .execute import execute, failure
from .hygiene import clean_up, leaked_state
from .observe import recording_backend, recording_guards, recording_recompiles
from .capabilities import recompile_limit_name
from .outcome import Capture, Execution, Outcome, RunConfig, VariantRun
from .pipeline import backend_config, isolated_global_state, spared
from .model_changes import MODEL_CHANGES, SEED
from .model_state import own_state_changes, repeated_layers, restored
from .structure import StructureRecorder, recording_structure, region_nodes

# The oracles that judge a model (the others read a generated program).
MODEL_ORACLES = ("differential", "hygiene", "region_identity", "rewrite", "graph_validity", "dedup_toggle",
                 "determinism", "completeness", "guards", "recompiles")


class FactoryError(ValueError):
    """The factory cannot be loaded or does not return (model, inputs)."""


def _module(name: str):  # type: ignore[no-untyped-def]
    """``package.module``, or a file (``examples/tiny_llama.py``, ``.py``
    optional) loaded under a name of its own."""
    if "/" not in name and not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name if name.endswith(".py") else name + ".py").resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    key = f"_factory_{abs(hash(str(path)))}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


def load_factory(spec: str) -> Callable[[], Any]:
    module_name, sep, name = spec.rpartition(":")
    if not sep or not module_name or not name:
        raise FactoryError(f"factory {spec!r}: expected package.module:name or path/to/file.py:name")
    try:
        module = _module(module_name)
    except Exception as e:
        raise FactoryError(f"factory {spec!r}: importing {module_name} raised {type(e).__name__}: {e}") from None
    factory = getattr(module, name, None)
    if not callable(factory):
        raise FactoryError(f"factory {spec!r}: {module_name} has no callable {name!r}")
    return factory


def build(factory: Callable[[], Any], spec: str = "factory") -> tuple[torch.nn.Module, list, dict]:
    """The model and its inputs (positional, keyword), made under SEED."""
    torch.manual_seed(SEED)
    made = factory()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise FactoryError(f"{spec} returned {type(made).__name__}, expected (model, inputs)")
    model, inputs = made
    if callable(inputs) and not isinstance(inputs, torch.Tensor):
        inputs = inputs()
    if not isinstance(model, torch.nn.Module):
        raise FactoryError(f"{spec} returned a {type(model).__name__} as its model, expected an nn.Module")
    if isinstance(inputs, dict):
        return model, [], dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return model, list(inputs), {}
    raise FactoryError(f"{spec} returned {type(inputs).__name__} as its inputs, expected a dict or a tuple")


def _float64(model: torch.nn.Module, args: list, kwargs: dict):
    def cast(x: Any) -> Any:
        return x.detach().double().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) \
            and x.is_floating_point() else x

    return copy.deepcopy(model).double(), [cast(a) for a in args], {k: cast(v) for k, v in kwargs.items()}


def numerics(model: torch.nn.Module, args: list, kwargs: dict) -> dict:
    """The least precise floating dtype the model holds or takes; zero signs
    are never judged (a model sums everywhere)."""
    dtypes = [t.dtype for t in (*model.parameters(), *model.buffers(), *args, *kwargs.values())
              if isinstance(t, torch.Tensor) and t.is_floating_point()]
    floor = max(dtypes, key=lambda d: torch.finfo(d).eps) if dtypes else torch.float32
    return {"floor": str(floor).removeprefix("torch."), "signed_zeros": False}


def run_eager(factory: Callable[[], Any], spec: str, config: RunConfig, float64: bool = False) -> Execution:
    model, args, kwargs = build(factory, spec)
    if float64:
        model, args, kwargs = _float64(model, args, kwargs)
    return execute(model, model, args, [f"arg{i}" for i in range(len(args))], config.backward, kwargs)


def run_compiled(factory: Callable[[], Any], spec: str, config: RunConfig) -> tuple[Execution, Capture]:
    capture = Capture()
    torch._dynamo.reset()
    backend = resolve(config.backend)
    model, args, kwargs = build(factory, spec)
    recorder = StructureRecorder() if config.record_structure else None
    options = dict(backend.options)
    if has("guard_filter_fn"):
        options["options"] = {**options.get("options", {}), "guard_filter_fn": recording_guards(capture)}
    with torch_config.patched(config.torch_config), torch._dynamo.config.patch(use_graph_deduplication=config.dedup), \
            backend_config(backend), isolated_global_state():
        with recording_structure(recorder) if recorder is not None else contextlib.nullcontext():
            try:
                compiled = torch.compile(model, backend=recording_backend(backend.compiler_fn(), capture, recorder),
                                         **({"fullgraph": config.fullgraph} if config.fullgraph is not None else {}),
                                         **({"dynamic": config.dynamic} if config.dynamic is not None else {}),
                                         **options)
            except Exception as e:
                return Execution(failure=failure(e, "dynamo")), capture
            result = execute(compiled, model, args, [f"arg{i}" for i in range(len(args))], config.backward, kwargs)
        capture.recording = False
        if recorder is not None:
            capture.structure = recorder.graphs
            capture.region_groups = [g for record in recorder.graphs for g in region_nodes(record.groups)]
        if config.variants and result.failure is None:
            _recall(factory, spec, compiled, model, config, capture)
    capture.leaked_state = leaked_state()
    if capture.leaked_state:
        clean_up()
    torch._dynamo.reset()
    return result, capture


def _recall(factory, spec: str, compiled, model, config: RunConfig, capture: Capture) -> None:  # type: ignore[no-untyped-def]
    """Each change of MODEL_CHANGES, one at a time, to the compiled model
    (its weights put back first): eager twice and in float64 under the same
    change, then the compiled call; whether it recompiled and why."""
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    reasons: list[str] = []
    name = recompile_limit_name()
    chosen = list(MODEL_CHANGES.items())[: config.variants if config.variants > 0 else None]
    changed_itself = own_state_changes(*build(factory, spec))
    not_judged = {kind: entry.judged(config) for kind, entry in chosen}  # before any re-call
    with recording_recompiles(reasons), torch._dynamo.config.patch(**{name: getattr(torch._dynamo.config, name) + len(chosen)}):
        for kind, entry in chosen:
            started = time.perf_counter()
            change, context = entry.make, entry.context
            run = VariantRun({"kind": kind, "target": "model", "description": entry.description,
                              "neutral": entry.neutral, "dtype": entry.dtype, "apply": [], "undo": []})
            if kind == "model:again" and changed_itself:  # its recompile is the model's doing
                run.variant["explained"] = f"the model changes its own state on a call: {', '.join(changed_itself[:5])}"
            capture.variants.append(run)

            def under(float64: bool = False, target=None):  # type: ignore[no-untyped-def]
                torch.manual_seed(SEED)
                m, args, kwargs = build(factory, spec)
                made = change(m, args, kwargs)
                if made is None:
                    return None
                m, args, kwargs = made
                if float64:
                    m, args, kwargs = _float64(m, args, kwargs)
                fn = m if target is None else target
                with context():
                    return execute(fn, m if target is None else model, args, [f"arg{i}" for i in range(len(args))],
                                   config.backward, kwargs), (m, args, kwargs)

            run.invalid = not_judged[kind]
            if run.invalid:
                continue
            first = under()
            if first is None:
                run.invalid = "it does not apply to this model"
                continue
            run.eager = first[0]
            if run.eager.failure is not None:
                run.invalid = f"eager fails under it: {run.eager.failure.type}: {run.eager.failure.message}"
                continue
            run.eager_again = under()[0]
            try:
                run.reference = under(float64=True)[0]
                run.reference = run.reference if run.reference.failure is None else None
            except Exception:
                run.reference = None
            with torch.no_grad():  # the compiled model's own weights, as the factory made them
                model.load_state_dict(weights)
            for p in model.parameters():
                p.grad = None
            with restored(model):
                _, args, kwargs = change(model, *build(factory, spec)[1:])  # the inputs eager got (one seed)
                compiles, n = capture.late_compiles, len(reasons)
                with context():
                    run.compiled = execute(compiled, model, args, [f"arg{i}" for i in range(len(args))],
                                           config.backward, kwargs)
            run.recompiled = capture.late_compiles > compiles or len(reasons) > n
            run.recompile_reasons = reasons[n:]
            run.served_by_original = not run.recompiled
            run.seconds = time.perf_counter() - started


def model_config(backend: str = "aot_eager", **kwargs) -> RunConfig:
    """The run MODEL_ORACLES need: a compile without deduplication, a second
    capture, and every change of MODEL_CHANGES re-called."""
    return RunConfig(backend=backend, companions=("dedup_off", "recapture"), variants=-1, **kwargs)


def run_model(spec: str, config: RunConfig | None = None) -> Outcome:
    """The model of ``spec`` run eagerly (twice, and in float64) and compiled
    with ``config`` and its companions (spared as for a program: the pass
    grouped nothing, or the main compile failed)."""
    config = config or model_config()
    factory = load_factory(spec)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    with isolated_global_state():
        eager, eager_again = run_eager(factory, spec, config), run_eager(factory, spec, config)
        if eager.failure is not None:
            raise FactoryError(f"{spec}: the model fails in eager ({eager.failure.stage}): "
                               f"{eager.failure.type}: {eager.failure.message}")
        try:
            reference = run_eager(factory, spec, config, float64=True)
            reference = reference if reference.failure is None else None
        except Exception:  # a model that cannot run in float64
            reference = None
        seconds["eager"] = time.perf_counter() - t
        t = time.perf_counter()
        compiled, capture = run_compiled(factory, spec, config)
        seconds["compiled"] = time.perf_counter() - t
        built = build(factory, spec)  # read, never called
        outcome = Outcome(None, config, spec, eager, eager_again, reference, compiled, capture, seconds,
                          numerics=numerics(*built), repeats=repeated_layers(built[0]))
        reason = spared(config, compiled, capture)
        for name in config.companions:
            t = time.perf_counter()
            if name == "recapture" and compiled.failure is not None:
                outcome.spared[name] = "the main compile failed: a second capture has nothing to be compared with"
            elif reason:
                outcome.spared[name] = reason
                if name == "dedup_off":
                    outcome.companions[name] = (compiled, capture)
            elif name == "dedup_off":
                outcome.companions[name] = run_compiled(factory, spec, replace(config, dedup=False, companions=()))
            elif name == "recapture":
                outcome.companions[name] = run_compiled(factory, spec, replace(config, backward=False, companions=(),
                                                                               variants=0))
            seconds[name] = time.perf_counter() - t
    return outcome
