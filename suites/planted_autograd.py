"""Planted faults in torch's hook and saved-tensor machinery where it meets
compiled code, one per family of autograd features (generators.autograd)
and one per global module hook feature, each reached only by programs with
a feature of its family (its feature):

- ``intermediate_hook_dropped`` (tensor): the first hook on an intermediate
  is kept, the others dropped: per frame where Dynamo traces the hook into
  the graph, per compiled graph where it is registered after a graph break
  (a body compiled once, run for every repeat);
- ``compiled_node_prehook_halved`` (node): a pre-hook registered on the node
  of a compiled graph (AOTAutograd's ``CompiledFunction``) sees half the
  gradient its node receives;
- ``forward_hooks_skipped_when_compiling`` (module): Dynamo's inlining of
  ``Module._call_impl`` runs the forward of a module with forward hooks
  without them;
- ``global_forward_hooks_skipped_when_compiling``, ``global_backward_hooks_skipped_when_compiling``
  (module, its global hooks: one fault each): the same inlining reads the global forward hooks (the
  global full backward pre-hooks) as none;
- ``compiled_unpack_skipped`` (saved): a compiled function's saved tensors
  get the user's pack hook and a stock unpack (the payload as packed: a
  transform the user's unpack undoes stays);
- ``retained_backward_zeroed`` (grad): a compiled node run backward a
  second time (``retain_graph=True``) returns zeros, as if its saved state
  were freed after the first;
- ``region_budget_grads_scaled`` (partition): the min-cut partitioner,
  partitioning a joint graph that carries a region's memory budget
  (``torch.autograd.graph.region_activation_memory_budget``), scales the
  first gradient its backward returns.

And two in what eager and compiled code share, which no comparison of the two can see (the autograd-trace
oracle's ``transparent`` check, against the program without its features, does):

- ``saved_on_cpu_in_bfloat16`` (saved): ``torch.autograd.graph.save_on_cpu`` keeps a bfloat16 copy of each
  float saved tensor;
- ``gradient_edge_of_a_view`` (grad): ``torch.autograd.graph.get_gradient_edge`` returns the edge of a
  view of its tensor, which no graph reaches (the gradient asked for by it comes back None).

``<fault>__<backend>`` enters one in a repro's own process.
"""

from __future__ import annotations

import collections
import contextlib
from typing import Iterator

import torch
from torch._dynamo.variables import tensor as dynamo_tensor

from .planted_pass import _patched, fault_backend


def _compiled(node) -> bool:  # type: ignore[no-untyped-def]
    return getattr(getattr(node, "_forward_cls", None), "__name__", "") == "CompiledFunction"


@contextlib.contextmanager
def intermediate_hook_dropped() -> Iterator[None]:
    """Both ways a hook on an intermediate reaches compiled code: traced into the graph (a hook without
    side effects: Dynamo's ``register_hook_op``), a frame keeps its first and drops the rest; registered
    after a graph break on an output of a compiled graph, each compiled graph keeps its first."""
    def wrap(orig):  # type: ignore[no-untyped-def]
        def register(self, tx, name, hook):  # type: ignore[no-untyped-def]
            if not self.source:
                seen = tx.output.__dict__.setdefault("_planted_hooks", [0])
                seen[0] += 1
                if seen[0] > 1:
                    from torch._dynamo import variables

                    return variables.RemovableHandleVariable(mutation_type=variables.base.ValueMutationNew())
            return orig(self, tx, name, hook)

        return register

    kept: set = set()

    def wrap_eager(original):  # type: ignore[no-untyped-def]
        def register_hook(self, hook):  # type: ignore[no-untyped-def]
            node = self.grad_fn
            if node is not None and _compiled(node) and not torch.compiler.is_compiling():
                if type(node) in kept:
                    return torch.utils.hooks.RemovableHandle(collections.OrderedDict())
                kept.add(type(node))
            return original(self, hook)

        return register_hook

    with _patched(torch.Tensor, "register_hook", wrap_eager), \
            _patched(dynamo_tensor.TensorVariable, "_method_register_hook", wrap):
        yield


def compiled_node_prehook_halved():
    def wrap(original):  # type: ignore[no-untyped-def]
        def register_prehook(self, fn):  # type: ignore[no-untyped-def]
            if not _compiled(self):
                return original(self, fn)
            return original(self, lambda grad_outputs: fn(tuple(None if g is None else g * 0.5
                                                                for g in grad_outputs)))

        return register_prehook

    return _patched(torch.autograd.function.BackwardCFunction, "register_prehook", wrap)


def forward_hooks_skipped_when_compiling():
    def wrap(orig):  # type: ignore[no-untyped-def]
        def _call_impl(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if torch.compiler.is_compiling() and self._forward_hooks:
                return self.forward(*args, **kwargs)
            return orig(self, *args, **kwargs)

        return _call_impl

    return _patched(torch.nn.Module, "_call_impl", wrap)


class _UnseenWhenCompiling(collections.OrderedDict):
    """A global hook dict (torch.nn.modules.module) empty to the code Dynamo traces and whole to eager."""

    def __len__(self) -> int:
        return 0 if torch.compiler.is_compiling() else super().__len__()

    def __bool__(self) -> bool:
        return not torch.compiler.is_compiling() and super().__len__() > 0

    def items(self):  # type: ignore[no-untyped-def]
        return [] if torch.compiler.is_compiling() else list(super().items())

    def values(self):  # type: ignore[no-untyped-def]
        return [] if torch.compiler.is_compiling() else list(super().values())


@contextlib.contextmanager
def _global_hooks_unseen_when_compiling(name: str) -> Iterator[None]:
    """Dynamo's inlining of ``Module._call_impl`` reads the global hook dict ``name`` as empty: a module call
    compiled runs without the hooks registered for every module. (A wrapper of ``_call_impl`` itself, as the
    module family's fault is, would not do: on this torch a second compile in a process under any wrapper of it,
    one that only calls the original, drops the instances' forward hooks too.)"""
    from torch.nn.modules import module as nn_module

    original = getattr(nn_module, name)
    setattr(nn_module, name, _UnseenWhenCompiling(original))
    try:
        yield
    finally:
        planted = getattr(nn_module, name)
        setattr(nn_module, name, original)
        original.clear()
        original.update(planted)


def global_forward_hooks_skipped_when_compiling():
    return _global_hooks_unseen_when_compiling("_global_forward_hooks")


def global_backward_hooks_skipped_when_compiling():
    return _global_hooks_unseen_when_compiling("_global_backward_pre_hooks")


def compiled_unpack_skipped():
    def wrap(orig):  # type: ignore[no-untyped-def]
        @classmethod  # type: ignore[misc]
        def apply(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
            hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
            if cls.__name__ != "CompiledFunction" or hooks is None:
                return orig.__func__(cls, *args, **kwargs)
            pack, _ = hooks
            torch._C._autograd._pop_saved_tensors_default_hooks()
            # the user's pack, then a stock unpack: the payload as packed, its transform not undone
            torch._C._autograd._push_saved_tensors_default_hooks(
                pack, lambda packed: packed[1] if isinstance(packed, tuple) else packed)
            try:
                return orig.__func__(cls, *args, **kwargs)
            finally:
                torch._C._autograd._pop_saved_tensors_default_hooks()
                torch._C._autograd._push_saved_tensors_default_hooks(*hooks)

        return apply

    return _patched(torch.autograd.Function, "apply", wrap)


def retained_backward_zeroed():
    def wrap(orig):  # type: ignore[no-untyped-def]
        def get(self):  # type: ignore[no-untyped-def]
            fn = orig(self)
            if not _compiled(self):
                return fn

            def once(ctx, *args):  # type: ignore[no-untyped-def]
                out = fn(ctx, *args)
                calls = ctx.__dict__.get("_planted_calls", 0)
                ctx.__dict__["_planted_calls"] = calls + 1
                if not calls:
                    return out
                return tuple(None if g is None else torch.zeros_like(g) for g in out) if isinstance(out, tuple) \
                    else torch.zeros_like(out)

            return once

        return get

    return _patched(torch.autograd.function.BackwardCFunction, "_get_user_fn", wrap)


def region_budget_grads_scaled():
    from torch._functorch import partitioners

    from .planted_settings import partitioned_grads_scaled

    return partitioned_grads_scaled(lambda joint: any(
        partitioners._get_memory_budget_annotation(n) is not None for n in joint.graph.nodes))


def saved_on_cpu_in_bfloat16():
    def wrap(orig):  # type: ignore[no-untyped-def]
        def init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            orig(self, *args, **kwargs)
            pack = self.pack_hook
            self.pack_hook = lambda t: pack(t.to(torch.bfloat16).to(t.dtype) if t.is_floating_point() else t)

        return init

    return _patched(torch.autograd.graph.save_on_cpu, "__init__", wrap)


def gradient_edge_of_a_view():
    return _patched(torch.autograd.graph, "get_gradient_edge", lambda orig: lambda t: orig(t.view_as(t)))


FAULTS = {f.__name__: f for f in (intermediate_hook_dropped, compiled_node_prehook_halved,
                                   forward_hooks_skipped_when_compiling, global_forward_hooks_skipped_when_compiling,
                                   global_backward_hooks_skipped_when_compiling, compiled_unpack_skipped,
                                   retained_backward_zeroed, region_budget_grads_scaled, saved_on_cpu_in_bfloat16,
                                   gradient_edge_of_a_view)}


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    return fault_backend(name, FAULTS)
