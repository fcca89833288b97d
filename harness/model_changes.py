"""The changes a model's second call makes (``MODEL_CHANGES``): each re-call
of a compiled model tells whether Dynamo's guards saw what changed and
whether the entry compiled for it is right. Every change is made on a model
and inputs rebuilt under ``SEED``, so eager and the compiled call see the same."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch._dynamo

from .backends import resolve
from .outcome import RunConfig
from .pipeline import isolated_global_state

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
