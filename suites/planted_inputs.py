"""Planted faults that only what a region is given (``generators.inputs``)
can reach, each in the reuse of a ``nested_compile_region`` body
(torch/_dynamo/variables/invoke_subgraph.py: a call's leaves are fingerprinted,
matched against a traced body's condition, and the body stamped out):

- ``container_leaves_swapped``: a body stamped out for a call whose tensors
  come in a container (or two or more by keyword) gets its last two leaves
  the other way round;
- ``none_taken_for_tensor``: a body traced for ``None`` serves a call passing
  a tensor there, and the other way round;
- ``module_guards_skipped``: a module passed as an argument (not the
  region's own ``self``) is taken on trust: its guards are not re-run;
- ``parameter_taken_for_tensor``: a call passing an ``nn.Parameter`` where
  the traced call passed a plain tensor of the same metadata (or the other
  way round) is stamped out with the traced call's tensor (the same values;
  the gradient goes astray);
- ``sizes_specialized`` (a backend): a dynamic-size input read only up to
  the size it was compiled at (reached by a data-dependent-size tensor);
- ``requires_grad_ignored``: ``requires_grad`` tells no two calls apart,
  neither as a tensor's metadata nor as a bool read from it at the call site
  (``given=x.requires_grad``);
- ``reuse_refused``: no traced body is ever reused: every call traces its
  own (a missed reuse, for the completeness oracle).

``<fault>__<backend>`` enters one in a repro's own process.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Iterator

from torch._dynamo.variables import invoke_subgraph as reuse

from .planted_pass import _patched, fault_backend


def _nested(treespec) -> bool:  # type: ignore[no-untyped-def]
    """A container among the call's arguments, or two or more keywords."""
    if treespec is None or treespec.num_children != 2:
        return False
    args, kwargs = treespec.children()
    return any(not c.is_leaf() for c in args.children()) or kwargs.num_children >= 2


def container_leaves_swapped():
    def wrap(orig):  # type: ignore[no-untyped-def]
        def stamp(tx, fingerprint, cached):  # type: ignore[no-untyped-def]
            if not _nested(fingerprint.treespec):
                return orig(tx, fingerprint, cached)
            flat = reuse.get_flat_proxies

            def swapped(fp):  # type: ignore[no-untyped-def]
                proxies = flat(fp)
                return proxies[:-2] + proxies[-2:][::-1] if len(proxies) >= 2 else proxies

            reuse.get_flat_proxies = swapped
            try:
                return orig(tx, fingerprint, cached)
            finally:
                reuse.get_flat_proxies = flat

        return stamp

    return _patched(reuse, "stamp_out_subgraph", wrap)


def _checks(condition, fingerprint, same) -> object:  # type: ignore[no-untyped-def]
    """``condition`` with each input check the fault waves through (``same(cached, current)``) made the current one's."""
    checks = list(condition.input_checks)
    for i, ((tag, value), (cur_tag, vt)) in enumerate(zip(checks, fingerprint.flat_vts)):
        if same((tag, value), (cur_tag, vt)):
            checks[i] = (cur_tag, vt.value if cur_tag is reuse.InputTag.CONSTANT else
                         reuse.extract_tensor_metadata(vt.proxy.node.meta.get("example_value"))
                         if cur_tag is reuse.InputTag.TENSOR else None)
    return replace(condition, input_checks=checks)


def _waving(waved):  # type: ignore[no-untyped-def]
    """Reuse matching every input check ``waved(cached, current)`` passes as if it were the current one's."""
    def wrap(orig):  # type: ignore[no-untyped-def]
        def is_reusable(tx, condition, fingerprint, entry):  # type: ignore[no-untyped-def]
            if len(condition.input_checks) == len(fingerprint.flat_vts):
                condition = _checks(condition, fingerprint, waved)
            return orig(tx, condition, fingerprint, entry)

        return is_reusable

    return _patched(reuse, "is_reusable", wrap)


def _is_none(tag, value) -> bool:  # type: ignore[no-untyped-def]
    return tag is reuse.InputTag.CONSTANT and value is None


def none_taken_for_tensor():
    def waved(cached, current) -> bool:  # type: ignore[no-untyped-def]
        (tag, value), (cur_tag, vt) = cached, current
        cur_none = _is_none(cur_tag, getattr(vt, "value", 0))
        return {tag, cur_tag} == {reuse.InputTag.CONSTANT, reuse.InputTag.TENSOR} and (_is_none(tag, value) or cur_none)

    return _waving(waved)


def module_guards_skipped():
    def wrap(orig):  # type: ignore[no-untyped-def]
        def is_reusable(tx, condition, fingerprint, entry):  # type: ignore[no-untyped-def]
            if any(tag is reuse.InputTag.MODULE for tag, _ in fingerprint.flat_vts[1:]):
                condition = replace(condition, guards=[])
            return orig(tx, condition, fingerprint, entry)

        return is_reusable

    return _patched(reuse, "is_reusable", wrap)


def _swaps(tx, fingerprint, arg_sources) -> dict:  # type: ignore[no-untyped-def]
    """Leaf index -> (the traced call's source, its value) where one of this call and the traced call
    passes an nn.Parameter and the other a plain tensor."""
    import torch

    scope = {"G": tx.output.root_tx.f_globals, "L": tx.output.root_tx.f_locals}
    out = {}
    for i, ((tag, _), new) in enumerate(zip(fingerprint.flat_vts, fingerprint.arg_sources)):
        old = arg_sources[i] if i < len(arg_sources) else None
        if tag is not reuse.InputTag.TENSOR or old is None or new is None or old == new:
            continue
        was, now = old.get_value(scope, {}, {}), new.get_value(scope, {}, {})
        if isinstance(now, torch.nn.Parameter) != isinstance(was, torch.nn.Parameter):
            out[i] = (old, was)
    return out


@contextlib.contextmanager
def parameter_taken_for_tensor() -> Iterator[None]:
    from torch._dynamo.variables.builder import VariableBuilder

    def wrap_reusable(orig):  # type: ignore[no-untyped-def]
        def is_reusable(tx, condition, fingerprint, entry):  # type: ignore[no-untyped-def]
            olds = {old for old, _ in _swaps(tx, fingerprint, entry.arg_sources).values()}
            if olds:
                condition = replace(condition, guards=[g for g in condition.guards if g[0] not in olds])
            return orig(tx, condition, fingerprint, entry)

        return is_reusable

    def wrap_stamp(orig):  # type: ignore[no-untyped-def]
        def stamp(tx, fingerprint, cached):  # type: ignore[no-untyped-def]
            flat = list(fingerprint.flat_vts)
            for i, (old, was) in _swaps(tx, fingerprint, cached.arg_sources).items():
                flat[i] = (flat[i][0], VariableBuilder(tx, old)(was))
            return orig(tx, fingerprint._replace(flat_vts=flat), cached)

        return stamp

    with _patched(reuse, "is_reusable", wrap_reusable), _patched(reuse, "stamp_out_subgraph", wrap_stamp):
        yield


@contextlib.contextmanager
def reuse_refused() -> Iterator[None]:
    """Every reuse fails: the traced-body cache (``is_reusable``) and the install-time comparison with the
    bodies installed before (``are_same_graph_modules``): identical calls each get a subgraph of their own."""
    from torch._dynamo.variables import higher_order_ops

    with _patched(reuse, "is_reusable", lambda orig: lambda tx, condition, fingerprint, entry: False), \
            _patched(higher_order_ops, "are_same_graph_modules", lambda orig: lambda *args, **kwargs: False):
        yield


def requires_grad_ignored():
    def waved(cached, current) -> bool:  # type: ignore[no-untyped-def]
        (tag, value), (cur_tag, vt) = cached, current
        if tag is cur_tag is reuse.InputTag.CONSTANT:
            return type(value) is bool and type(vt.value) is bool
        if not tag is cur_tag is reuse.InputTag.TENSOR:
            return False
        example = vt.proxy.node.meta.get("example_value")
        now = None if example is None else reuse.extract_tensor_metadata(example)
        return now is not None and value != now and value[:-1] == now[:-1]  # (shape, stride, dtype, device, requires_grad)

    return _waving(waved)


def __getattr__(name: str):
    """``<fault>__<backend>``: a backend under a planted fault of a region's inputs."""
    return fault_backend(name, {f.__name__: f for f in (container_leaves_swapped, none_taken_for_tensor,
                                                        module_guards_skipped, requires_grad_ignored,
                                                        parameter_taken_for_tensor, reuse_refused)})


def sizes_specialized(gm, example_inputs):
    """A backend that runs the graph like ``eager`` but copies each tensor
    input of a dynamic size into a buffer of the size it was compiled at,
    as a static-input backend would: a later, shorter input leaves the last
    call's values in the buffer's tail, a longer one is cut (reached by a
    tensor whose size depends on the data, which Dynamo makes dynamic once
    a second size is seen)."""
    import torch
    from torch.fx.experimental.symbolic_shapes import free_symbols

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    buffers = {}
    for i, (node, x) in enumerate(zip(placeholders, example_inputs)):
        fake = node.meta.get("example_value")
        if isinstance(fake, torch.Tensor) and fake.dim() >= 1 and free_symbols(fake.shape[0]):
            buffers[i] = torch.zeros_like(x)  # the example is a real tensor, of the size compiled at

    def run(*args):  # type: ignore[no-untyped-def]
        args = list(args)
        for i, buffer in buffers.items():
            n = min(len(buffer), args[i].shape[0])
            with torch.no_grad():
                buffer[:n].copy_(args[i][:n])
            args[i] = buffer
        return gm(*args)

    return run
