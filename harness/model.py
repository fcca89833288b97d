"""Any ``nn.Module`` through the pipeline, not only generated programs.

A *factory* (``package.module:name``) takes no argument and returns
``(model, inputs)``: the model, and its example inputs as a dict of keyword
arguments or a tuple of positional ones (or a callable making either). Every
run builds the model afresh from the factory under one seed, so the eager
runs, the float64 referee and each compile start from the same weights.
``run_model`` returns an ``Outcome`` like ``harness.pipeline.run_program``'s,
with no program: the oracles that need one (completeness, compile_region,
guards' changed calls) do not apply (``MODEL_ORACLES``).
"""

from __future__ import annotations

import copy
import importlib
import time
from dataclasses import replace
from typing import Any, Callable

import torch
import torch._dynamo

from . import torch_config
from .backends import resolve
from .capabilities import has
from .execute import execute, failure
from .hygiene import clean_up, leaked_state
from .observe import recording_backend, recording_guards
from .outcome import Capture, Execution, Outcome, RunConfig
from .pipeline import backend_config, isolated_global_state, spared
from .structure import StructureRecorder, recording_structure, region_nodes

# The oracles that judge a model (the others read a generated program).
MODEL_ORACLES = ("differential", "hygiene", "region_identity", "rewrite", "graph_validity", "dedup_toggle",
                 "determinism")
SEED = 0


class FactoryError(ValueError):
    """The factory cannot be loaded or does not return (model, inputs)."""


def load_factory(spec: str) -> Callable[[], Any]:
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise FactoryError(f"factory {spec!r}: expected package.module:name")
    try:
        module = importlib.import_module(module_name)
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


def numerics(factory: Callable[[], Any], spec: str) -> dict:
    """The least precise floating dtype the model holds or takes; zero signs
    are never judged (a model sums everywhere)."""
    model, args, kwargs = build(factory, spec)
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
        with recording_structure(recorder) if recorder is not None else _nothing():
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
    capture.leaked_state = leaked_state()
    if capture.leaked_state:
        clean_up()
    torch._dynamo.reset()
    return result, capture


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def model_config(backend: str = "aot_eager", **kwargs) -> RunConfig:
    """The run MODEL_ORACLES need: a compile without deduplication and a
    second capture; no changed calls (they are a generated program's)."""
    return RunConfig(backend=backend, companions=("dedup_off", "recapture"), variants=0, **kwargs)


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
        outcome = Outcome(None, config, spec, eager, eager_again, reference, compiled, capture, seconds,
                          numerics=numerics(factory, spec))
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
                outcome.companions[name] = run_compiled(factory, spec, replace(config, backward=False, companions=()))
            seconds[name] = time.perf_counter() - t
    return outcome
