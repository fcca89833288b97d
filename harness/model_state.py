"""What a model holds besides tensors, as Dynamo sees it: its modules'
plain attributes (guarded on, changed by a call or a change of mode) and the
layers alike that make its repeats."""

from __future__ import annotations

import contextlib

import torch


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


def own_state_changes(model: torch.nn.Module, args: list, kwargs: dict) -> list[str]:
    """The attributes a model changes on its own first (eager) call:
    transformers' classifiers set ``config.problem_type`` there, and a guard
    on it rightly recompiles the same call."""
    before = _state(model)
    with torch.no_grad():
        model(*args, **kwargs)
    after = _state(model)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
