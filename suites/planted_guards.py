"""Planted faults in Dynamo's guards: each context manager makes the real
GuardBuilder leave out one kind of check (or add a needless one) while a
program compiles, so the guard oracles can be shown to fire."""

from __future__ import annotations

import functools

import torch
from torch._dynamo.guards import GuardBuilder

from .planted_pass import _patched as _patched_on

_patched = functools.partial(_patched_on, GuardBuilder)


def _on_module(guard) -> bool:  # type: ignore[no-untyped-def]
    return "L['self']" in guard.name


def dtype_check_dropped():
    """A program input's tensor guard checks everything but the dtype: in
    place of TENSOR_MATCH, a guard on shape, strides, device and requires_grad."""

    def make(original):  # type: ignore[no-untyped-def]
        def TENSOR_MATCH(self, guard, value=None):  # type: ignore[no-untyped-def]
            t = self.get(guard)
            if isinstance(t, torch.nn.Parameter) or _on_module(guard) or not isinstance(t, torch.Tensor):
                return original(self, guard, value)
            meta = (tuple(t.shape), t.stride(), t.device, t.requires_grad)
            self.get_guard_manager(guard).add_lambda_guard(
                lambda x: isinstance(x, torch.Tensor) and (tuple(x.shape), x.stride(), x.device, x.requires_grad) == meta,
                [f"planted: {guard.name} matches but for its dtype"], guard.user_stack)

        return TENSOR_MATCH

    return _patched("TENSOR_MATCH", make)


def constant_check_dropped():
    """Constant values outside modules (globals, closure cells, arguments) are not checked."""
    return _patched("EQUALS_MATCH", lambda original: lambda self, guard, *a, **k:
                    original(self, guard, *a, **k) if _on_module(guard) else None)


def module_attribute_check_dropped():
    """Constant attributes of modules (and their classes) are not checked."""
    return _patched("EQUALS_MATCH", lambda original: lambda self, guard, *a, **k:
                    None if _on_module(guard) else original(self, guard, *a, **k))


def storage_guarded():
    """Every program input is also guarded on its storage address: any new
    tensor forces a recompile (an over-eager guard)."""

    def make(original):  # type: ignore[no-untyped-def]
        def TENSOR_MATCH(self, guard, value=None):  # type: ignore[no-untyped-def]
            original(self, guard, value)
            t = self.get(guard)
            if isinstance(t, torch.Tensor) and not _on_module(guard):
                ptr = t.data_ptr()
                self.get_guard_manager(guard).add_lambda_guard(
                    lambda x: x.data_ptr() == ptr, [f"planted: {guard.name}.data_ptr() == {ptr}"], guard.user_stack)

        return TENSOR_MATCH

    return _patched("TENSOR_MATCH", make)
