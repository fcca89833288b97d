"""Planted faults in Dynamo's guards: each context manager makes the real
GuardBuilder leave out one kind of check (or add a needless one) while a
program compiles, so the guard oracles can be shown to fire."""

from __future__ import annotations

import contextlib
import math
import weakref

import torch
from torch._dynamo.guards import GuardBuilder

from .planted_pass import _patched as _patched_on, _stack, fault_backend

def _patched(name: str, make):  # type: ignore[no-untyped-def]
    """GuardBuilder.<name> replaced by ``make(original)``, under the original's
    name: torch reads a guard's kind from its builder's ``__name__`` (reusing a
    nested_compile_region body rejects a '<lambda>' guard)."""

    def named(original):  # type: ignore[no-untyped-def]
        fn = make(original)
        fn.__name__ = fn.__qualname__ = name
        return fn

    return _patched_on(GuardBuilder, name, named)


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


def dict_item_check_dropped():
    """Constant values read from a dict by key (``OPTS['p0']``, the ``dict`` home of a free value) are not
    checked: an item changed in place, or the dict replaced by one holding another value, is not seen."""

    def make(original):  # type: ignore[no-untyped-def]
        return lambda self, guard, *a, **k: None if "]['" in guard.name and not _on_module(guard) \
            else original(self, guard, *a, **k)

    return _stack(_patched("EQUALS_MATCH", make), _patched("CONSTANT_MATCH", make))


def dict_key_check_dropped():
    """Whether a dict holds a key is not checked (DICT_CONTAINS, inverted or not, and DICT_NOT_CONTAINS
    no-ops): the entry compiled while ``OPTS.get('p0', d)`` read its default (the key taken out) accepts the
    call with the key back. Dynamo tries the first call's entry first there, so only the guard oracle's reverse
    check (that entry run on the call it accepts: harness.recall.run_reverse) meets it."""

    from torch._dynamo.variables.dicts import ConstDictVariable

    def noop(original):  # type: ignore[no-untyped-def]
        def dropped(self, guard, *a, **k):  # type: ignore[no-untyped-def]
            return None

        dropped.__name__ = dropped.__qualname__ = original.__name__  # torch reads a guard's kind from it
        return dropped

    # the dict variable holds the builders it installs as class attributes, taken at import
    return _stack(_patched("DICT_CONTAINS", noop), _patched("DICT_NOT_CONTAINS", noop),
                  _patched_on(ConstDictVariable, "CONTAINS_GUARD", noop),
                  _patched_on(ConstDictVariable, "NOT_CONTAINS_GUARD", noop))


def module_hook_check_dropped():
    """A module's empty hook dicts are not checked even where Dynamo is told to guard them
    (``skip_nnmodule_hook_guards=False``, the ``guard.module_hooks`` setting): a hook registered after a
    compile is not seen. Only programs drawn with that setting meet it (no change adds a hook otherwise).
    (A dict that holds hooks is guarded by the dict guard manager of its key order, whose length check
    is the C++ manager's own: removing a hook is judged by the honest runs alone.)"""
    return _patched("EMPTY_NN_MODULE_HOOKS_DICT", lambda original: lambda self, guard, *a, **k: None)


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


def float_guard_signless():
    """Float constants are checked by order, ``not (x < v or x > v)``, in
    place of ``x == v``: the same for every ordinary float, but NaN passes
    it (every comparison with NaN is false), and so does the other signed
    zero (as it passes ``==``: Dynamo's own guard, see
    ``float_sign_guarded``). Only a change to NaN (or to the other zero) of
    a float the program reads slips through."""

    def make(original):  # type: ignore[no-untyped-def]
        def EQUALS_MATCH(self, guard, *a, **k):  # type: ignore[no-untyped-def]
            value = self.get(guard)
            if type(value) is not float or value != value:
                return original(self, guard, *a, **k)
            self.get_guard_manager(guard).add_lambda_guard(
                lambda x: not (x < value or x > value), [f"planted: not ({guard.name} < {value!r} or > {value!r})"],
                guard.user_stack)

        return EQUALS_MATCH

    return _patched("EQUALS_MATCH", make)


def float_sign_guarded():
    """Not a fault: the guard Dynamo should have. Float constants are
    checked with their sign (``x == v and copysign(1, x) == copysign(1, v)``),
    so a graph compiled for 0.0 no longer serves -0.0 (torch 2.13 compares
    with ``==`` alone: the guard oracle's "sign" changes find that)."""

    def make(original):  # type: ignore[no-untyped-def]
        def EQUALS_MATCH(self, guard, *a, **k):  # type: ignore[no-untyped-def]
            value = self.get(guard)
            original(self, guard, *a, **k)
            if type(value) is float and value == 0.0:
                sign = math.copysign(1.0, value)
                self.get_guard_manager(guard).add_lambda_guard(
                    lambda x: not isinstance(x, float) or math.copysign(1.0, x) == sign,
                    [f"planted: copysign(1, {guard.name}) == {sign!r}"], guard.user_stack)

        return EQUALS_MATCH

    return _patched("EQUALS_MATCH", make)


@contextlib.contextmanager
def module_identity_dropped():
    """Module tensors are baked into the graph as constants (Dynamo's own
    ``install_free_tensors``), and the modules a program holds are taken to
    change only through their ``__setattr__``, as Dynamo's old
    MutationTracker had it: an entry checks that no module it compiled
    against had an attribute set since, in place of checking which module
    objects the program holds now. A new Parameter (``param:replace``) or a
    submodule set as an attribute, through a ModuleList or a Sequential
    recompiles; a submodule put in ``_modules`` directly, with
    ``add_module`` or into a ModuleDict leaves the old one's weights in the
    graph."""
    watched: weakref.WeakSet = weakref.WeakSet()
    setattrs = [0]  # __setattr__ calls on watched modules
    original_setattr = torch.nn.Module.__setattr__

    def counting_setattr(self, name, value):  # type: ignore[no-untyped-def]
        if self in watched:
            setattrs[0] += 1
        original_setattr(self, name, value)

    def make(original):  # type: ignore[no-untyped-def]
        def TENSOR_MATCH(self, guard, value=None):  # type: ignore[no-untyped-def]
            original(self, guard, value)
            root = self.scope["L"].get("self")
            if _on_module(guard) and isinstance(root, torch.nn.Module):
                watched.update(root.modules())
                seen = setattrs[0]
                self.guard_manager.root.add_lambda_guard(
                    lambda _: setattrs[0] == seen, [f"planted: no module attribute set since {seen}"], None)

        return TENSOR_MATCH

    torch.nn.Module.__setattr__ = counting_setattr  # type: ignore[method-assign]
    try:
        with torch._dynamo.config.patch(install_free_tensors=True), _patched("TENSOR_MATCH", make):
            yield
    finally:
        torch.nn.Module.__setattr__ = original_setattr  # type: ignore[method-assign]


def __getattr__(name: str):
    """``<fault>__<backend>``: a backend under a planted guard fault
    (``float_sign_guarded`` is not a fault, so not one of them)."""
    return fault_backend(name, {f.__name__: f for f in (
        dtype_check_dropped, constant_check_dropped, module_attribute_check_dropped, storage_guarded,
        float_guard_signless, module_identity_dropped, module_hook_check_dropped, dict_item_check_dropped,
        dict_key_check_dropped)})
