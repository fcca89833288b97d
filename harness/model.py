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

import contextlib
import copy
import importlib
import importlib.util
import sys
import time
from pathlib import Path
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

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
from .structure import StructureRecorder, recording_structure, region_nodes

# The oracles that judge a model (the others read a generated program).
MODEL_ORACLES = ("differential", "hygiene", "region_identity", "rewrite", "graph_validity", "dedup_toggle",
                 "determinism", "completeness", "guards", "recompiles")
SEED = 0


def _batch_of(args: list, kwargs: dict) -> Optional[int]:
    first = next((t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor) and t.dim()), None)
    return None if first is None else first.shape[0]


def _map(args: list, kwargs: dict, fn) -> tuple[list, dict]:  # type: ignore[no-untyped-def]
    """``fn`` over every input, once per object: an input passed twice (input
    ids as labels) stays one object, as the model got it."""
    made: dict[int, Any] = {}

    def once(x: Any) -> Any:
        if id(x) not in made:
            made[id(x)] = fn(x)
        return made[id(x)]

    return [once(a) for a in args], {k: once(v) for k, v in kwargs.items()}


def _leaf(made: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A changed input is an input of its own: a leaf, requiring grad as the original did."""
    return made.detach().requires_grad_(like.requires_grad)


def _doubled_batch(model, args, kwargs):  # type: ignore[no-untyped-def]
    b = _batch_of(args, kwargs)
    return model, *_map(args, kwargs, lambda t: _leaf(torch.cat([t, t.flip(0)]), t) if isinstance(t, torch.Tensor)
                        and t.dim() and t.shape[0] == b else t)


def _shorter(model, args, kwargs):  # type: ignore[no-untyped-def]
    """Token ids (the first integer input of two or more dimensions) and
    every input sharing their sequence length, two shorter; None for a model
    without token ids (an image's dimension 1 is its channels)."""
    first = next((t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor) and t.dim() >= 2
                  and not t.is_floating_point() and not t.is_complex()), None)
    if first is None or first.shape[1] < 3:
        return None
    n = first.shape[1]
    return model, *_map(args, kwargs, lambda t: _leaf(t[:, : n - 2].contiguous(), t) if isinstance(t, torch.Tensor)
                        and t.dim() >= 2 and t.shape[1] == n else t)


def _new_values(model, args, kwargs):  # type: ignore[no-untyped-def]
    def fresh(t):  # type: ignore[no-untyped-def]
        if not isinstance(t, torch.Tensor) or not t.numel():
            return t
        if t.is_floating_point():
            return torch.randn_like(t).requires_grad_(t.requires_grad)
        return t.flatten().roll(1).reshape(t.shape)  # the same token values, elsewhere

    return model, *_map(args, kwargs, fresh)


@contextlib.contextmanager
def restored(model: torch.nn.Module):  # type: ignore[no-untyped-def]
    """Every module's plain attributes (training, a dropout's p) put back
    after a change made them otherwise: the next change starts from the model
    as its factory made it."""
    saved = [(m, {k: v for k, v in vars(m).items() if k not in ("_parameters", "_buffers", "_modules")
                  and not isinstance(v, (torch.Tensor, torch.nn.Module))}) for m in model.modules()]
    try:
        yield model
    finally:
        for m, attributes in saved:
            m.__dict__.update(attributes)


def _state(model: torch.nn.Module) -> dict[str, str]:
    """Every submodule's plain Python attributes (and those of objects it
    holds, a config), as text: what Dynamo guards on besides tensors."""
    state = {}
    for name, module in model.named_modules():
        for key, value in vars(module).items():
            if key in ("_parameters", "_buffers", "_modules") or isinstance(value, (torch.Tensor, torch.nn.Module)):
                continue
            if hasattr(value, "__dict__") and not callable(value):
                state.update((f"{name}.{key}.{k}".lstrip("."), repr(v)) for k, v in vars(value).items()
                             if not isinstance(v, torch.Tensor))
            else:
                state[f"{name}.{key}".lstrip(".")] = repr(value)
    return state


def repeated_layers(model: torch.nn.Module) -> dict[str, int]:
    """Containers (ModuleList, Sequential, ModuleDict) holding two or more
    children alike: one class, the same parameter and buffer shapes and
    dtypes, the same plain attributes except ints (a layer's index). The
    largest alike group's size, by the container's path."""
    found = {}
    for path, module in model.named_modules():
        if not isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)):
            continue
        groups: dict[tuple, int] = {}
        for child in module.children():
            key = (type(child), tuple((n, tuple(t.shape), t.dtype) for n, t in (*child.named_parameters(),
                                                                                *child.named_buffers())),
                   tuple(sorted((k, v) for k, v in _state(child).items() if not k.rsplit(".", 1)[-1].endswith(
                       ("idx", "index", "_id")) and not v.lstrip("-").isdigit())))
            groups[key] = groups.get(key, 0) + 1
        if groups and max(groups.values()) >= 2:
            found[path or "(root)"] = max(groups.values())
    return found


def own_state_changes(factory: Callable[[], Any], spec: str) -> list[str]:
    """The attributes a model changes on its own first (eager) call:
    transformers' classifiers set ``config.problem_type`` there, and a guard
    on it rightly recompiles the same call."""
    model, args, kwargs = build(factory, spec)
    before = _state(model)
    with torch.no_grad():
        model(*args, **kwargs)
    after = _state(model)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _train(model, args, kwargs):  # type: ignore[no-untyped-def]
    return model.train(), args, kwargs


def _same(model, args, kwargs):  # type: ignore[no-untyped-def]
    return model, args, kwargs


DROPOUT = 0.1


def _dropout(model, args, kwargs):  # type: ignore[no-untyped-def]
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    if not dropouts:
        return None
    for m in dropouts:
        m.p = DROPOUT
    return model.train(), args, kwargs


_DRAWS: dict[str, bool] = {}


def draws_like_eager(backend: str) -> bool:
    """Whether ``backend`` draws eager's random numbers under one seed
    (aot_eager does; inductor draws its own unless ``fallback_random``): asked
    of the backend with a dropout once per process, never assumed by name."""
    if backend not in _DRAWS:
        layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).train()
        x = torch.randn(4, 8)
        torch.manual_seed(SEED)
        expected = layer(x)
        # no torch._dynamo.reset(): asked in the middle of a model's re-calls, it would drop their cache entries
        with torch._dynamo.config.patch(use_graph_deduplication=False), isolated_global_state():
            compiled = torch.compile(layer, backend=resolve(backend).compiler_fn())
            torch.manual_seed(SEED)
            try:
                _DRAWS[backend] = torch.equal(compiled(x), expected)
            except Exception:
                _DRAWS[backend] = False
    return _DRAWS[backend]


def _random_drawn_alike(config: RunConfig) -> str:
    return "" if draws_like_eager(config.backend) else \
        f"{config.backend} draws its own random numbers (a dropout differs from eager under one seed)"


@dataclass(frozen=True)
class ModelChange:
    """A change a model's second call makes (its guards must see it)."""

    description: str
    neutral: bool  # cannot change what the model computes
    dtype: str  # the floating dtype it brings in, if less precise
    make: Callable  # (model, args, kwargs) -> the same, changed, or None where it does not apply
    context: Callable = contextlib.nullcontext  # what the call runs under
    judged: Callable[[RunConfig], str] = lambda config: ""  # why it cannot be judged on this run, or ""


# Adding one is one entry. The changes of mode come before those of shape: a
# shape change recompiles with dynamic sizes, and every later recompile keeps them.
MODEL_CHANGES: dict[str, ModelChange] = {
    "model:again": ModelChange("the same inputs again", True, "", _same),
    "model:values": ModelChange("new input values of the same shapes", True, "", _new_values),
    "model:train": ModelChange("model.train()", False, "", _train),
    "model:no_grad": ModelChange("the call under torch.no_grad()", False, "", _same, torch.no_grad),
    "model:autocast": ModelChange("the call under bfloat16 autocast", False, "bfloat16", _same,
                                  lambda: torch.autocast("cpu", dtype=torch.bfloat16)),
    "model:dropout": ModelChange(f"train() with every nn.Dropout at p={DROPOUT}, drawn under one seed", False, "",
                                 _dropout, judged=_random_drawn_alike),
    "model:batch": ModelChange("the batch doubled", False, "", _doubled_batch),
    "model:sequence": ModelChange("the sequence two shorter", False, "", _shorter),
}


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
    changed_itself = own_state_changes(factory, spec)
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


def _nothing():
    import contextlib

    return contextlib.nullcontext()


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
        outcome = Outcome(None, config, spec, eager, eager_again, reference, compiled, capture, seconds,
                          numerics=numerics(factory, spec), repeats=repeated_layers(build(factory, spec)[0]))
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
