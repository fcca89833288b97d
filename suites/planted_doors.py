"""One planted fault per door of ``generators.doors``: each a small break in
the torch code only that door reaches (the entry point of a function
transform, a checkpoint flavour or a control-flow operator as Dynamo traces
it, what torch.export hands back, the FX graph cache's store, a symbolic
graph called at a second size), patched in for one run as the other planted
faults are. Wrong values are one part in a hundred off: beyond every
tolerance, far below "obviously broken". ``suites/test_planted_doors.py``
proves each is caught by its door's oracle and by nothing the plain
compile of the same program runs.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable

import torch
import torch._higher_order_ops
import torch.export
import torch.func
import torch.utils.checkpoint
from torch.utils._pytree import tree_map

from .planted_pass import _patched, fault_backend


def _bump(out):
    return tree_map(lambda t: t * 1.01 + 1e-2 if isinstance(t, torch.Tensor) and t.is_floating_point() else t, out)


def _compiling(when: Callable[..., bool] = lambda *a, **k: True) -> Callable:
    """The function's result off when Dynamo traces the call (and ``when`` holds)."""
    def make(orig):
        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            out = orig(*args, **kwargs)
            return _bump(out) if torch.compiler.is_compiling() and when(*args, **kwargs) else out
        return wrapper
    return make


def _maker_compiling(when: Callable[..., bool] = lambda *a, **k: True) -> Callable:
    """For a transform that returns a function: that function's result off when traced."""
    def make(orig):
        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            inner = orig(*args, **kwargs)
            if not when(*args, **kwargs):
                return inner

            @functools.wraps(inner)
            def call(*a, **k):
                out = inner(*a, **k)
                return _bump(out) if torch.compiler.is_compiling() else out
            return call
        return wrapper
    return make


# -- function transforms --------------------------------------------------------


def grad_off_when_traced():
    """torch.func.grad traced by Dynamo returns gradients one part in a hundred off."""
    return _patched(torch.func, "grad", _maker_compiling())


def vjp_off_when_traced():
    """torch.func.vjp traced by Dynamo returns outputs and products off."""
    return _patched(torch.func, "vjp", _compiling())


def jacrev_off_when_traced():
    """torch.func.jacrev traced by Dynamo returns a Jacobian off."""
    return _patched(torch.func, "jacrev", _maker_compiling())


def vmap_of_a_module_off_when_traced():
    """torch.func.vmap of a whole module, traced, returns batched results off."""
    return _patched(torch.func, "vmap", _maker_compiling(lambda fn, *a, **k: isinstance(fn, torch.nn.Module)))


def vmap_of_a_function_off_when_traced():
    """torch.func.vmap of a plain function (a call inside the model), traced, returns results off."""
    return _patched(torch.func, "vmap", _maker_compiling(lambda fn, *a, **k: not isinstance(fn, torch.nn.Module)))


def functional_call_off_when_traced():
    """torch.func.functional_call traced by Dynamo returns results off."""
    return _patched(torch.func, "functional_call", _compiling())


# -- activation checkpointing ---------------------------------------------------------


def _checkpoint(reentrant: bool, selective: bool):
    def when(*args, **kwargs):
        return kwargs.get("use_reentrant") is reentrant and ("context_fn" in kwargs) is selective
    return _patched(torch.utils.checkpoint, "checkpoint", _compiling(when))


def non_reentrant_checkpoint_off_when_traced():
    """Non-reentrant checkpointing (no policy), traced, returns results off."""
    return _checkpoint(False, False)


def reentrant_checkpoint_off_when_traced():
    """Reentrant checkpointing, traced, returns results off."""
    return _checkpoint(True, False)


def selective_checkpoint_off_when_traced():
    """Checkpointing with a selective policy, traced, returns results off."""
    return _checkpoint(False, True)


# -- control-flow operators --------------------------------------------------------------


def cond_off_when_traced():
    """torch.cond traced by Dynamo returns its branch's result off."""
    return _patched(torch, "cond", _compiling())


def while_loop_off_when_traced():
    """while_loop traced by Dynamo returns its carried values off."""
    return _patched(torch._higher_order_ops, "while_loop", _compiling())


def map_off_when_traced():
    """map traced by Dynamo returns its stacked results off."""
    return _patched(torch._higher_order_ops, "map", _compiling())


def scan_off_when_traced():
    """scan traced by Dynamo returns its carry and outputs off."""
    return _patched(torch._higher_order_ops, "scan", _compiling())


# -- torch.export ----------------------------------------------------------------------------


def _hooked(module, traced: bool):
    """``module`` with its outputs off: in eager calls, or (``traced``) when Dynamo traces it."""
    module.register_forward_hook(
        lambda m, args, out: _bump(out) if torch.compiler.is_compiling() is traced else None)
    return module


def _exported_off(strict: bool):
    def make(orig):
        @functools.wraps(orig)
        def export(*args, **kwargs):
            ep = orig(*args, **kwargs)
            if bool(kwargs.get("strict", False)) is strict:
                module = ep.module
                ep.module = lambda *a, **k: _hooked(module(*a, **k), traced=False)
            return ep
        return export
    return make


def strict_export_off():
    """A strict export's module computes results off."""
    return _patched(torch.export, "export", _exported_off(True))


def non_strict_export_off():
    """A non-strict export's module computes results off (run eagerly)."""
    return _patched(torch.export, "export", _exported_off(False))


def unflattened_export_off():
    """The unflattened exported program computes results off."""
    def make(orig):
        @functools.wraps(orig)
        def unflatten(*args, **kwargs):
            return _hooked(orig(*args, **kwargs), traced=False)
        return unflatten
    return _patched(torch.export, "unflatten", make)


def exported_module_off_when_traced():
    """An exported module computes results off when Dynamo traces it (torch.compile of it)."""
    from torch.export.exported_program import ExportedProgram

    def make(orig):
        @functools.wraps(orig)
        def module(self, *args, **kwargs):
            return _hooked(orig(self, *args, **kwargs), traced=True)
        return module
    return _patched(ExportedProgram, "module", make)


# -- the compile caches ------------------------------------------------------------------------


def fx_graph_cache_stores_nothing():
    """The FX graph cache counts a miss but never writes the entry: a warm compile misses again."""
    from torch._inductor.codecache import FxGraphCache

    return _patched(FxGraphCache, "_save_graph", lambda orig: staticmethod(lambda *a, **k: None))


# -- symbolic shapes ----------------------------------------------------------------------------


def _second_size_off(which: Callable[[object, list], bool]):
    """The compiled graph, called with other sizes than it was traced at
    (a symbolic graph reused for a grown batch), returns results off; only
    for graphs whose frame ``which`` picks (the door's own way in)."""
    from torch._dynamo.output_graph import OutputGraph

    def make(orig):
        @functools.wraps(orig)
        def call_user_compiler(self, gm, example_inputs):
            compiled = orig(self, gm, example_inputs)
            if not which(self, example_inputs):
                return compiled
            traced = [int(x.node.hint) if isinstance(x, torch.SymInt) and x.node.hint is not None else None
                      for x in example_inputs]

            def run(*args):
                out = compiled(*args)
                if any(t is not None and isinstance(a, int) and a != t for a, t in zip(args, traced)):
                    return _bump(list(out) if isinstance(out, tuple) else out)
                return out
            return run
        return call_user_compiler
    return _patched(OutputGraph, "call_user_compiler", make)


def _marked(attr: str) -> Callable[[object, list], bool]:
    def which(output, example_inputs) -> bool:
        return any(isinstance(v, torch.Tensor) and getattr(v, attr, None)
                   for v in output.root_tx.f_locals.values())
    return which


def _unmarked_dynamic(output, example_inputs) -> bool:
    import torch._dynamo.config as config

    return not config.assume_static_by_default and not config.capture_scalar_outputs and not any(
        isinstance(v, torch.Tensor) and (getattr(v, "_dynamo_dynamic_indices", None)
                                         or getattr(v, "_dynamo_weak_dynamic_indices", None))
        for v in output.root_tx.f_locals.values())


def _capturing(output, example_inputs) -> bool:
    import torch._dynamo.config as config

    return bool(config.capture_scalar_outputs)


def dynamic_graph_reused_off():
    """A dynamic=True graph reused at a second size returns results off."""
    return _second_size_off(_unmarked_dynamic)


def marked_graph_reused_off():
    """A graph whose batch dimension was mark_dynamic'ed, reused at a second size, returns results off."""
    return _second_size_off(_marked("_dynamo_dynamic_indices"))


def maybe_marked_graph_reused_off():
    """A graph whose batch dimension was maybe_mark_dynamic'ed, reused at a second size, returns results off."""
    return _second_size_off(_marked("_dynamo_weak_dynamic_indices"))


def unbacked_graph_reused_off():
    """A graph compiled capturing scalars (unbacked symbols), reused at a second size, returns results off."""
    return _second_size_off(_capturing)


FAULTS: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "transform:grad": grad_off_when_traced,
    "transform:vjp": vjp_off_when_traced,
    "transform:jacrev": jacrev_off_when_traced,
    "transform:vmap": vmap_of_a_module_off_when_traced,
    "transform:functional_call": functional_call_off_when_traced,
    "transform:vmap_each": vmap_of_a_function_off_when_traced,
    "checkpoint:non_reentrant": non_reentrant_checkpoint_off_when_traced,
    "checkpoint:reentrant": reentrant_checkpoint_off_when_traced,
    "checkpoint:selective": selective_checkpoint_off_when_traced,
    "control_flow:cond": cond_off_when_traced,
    "control_flow:while_loop": while_loop_off_when_traced,
    "control_flow:map": map_off_when_traced,
    "control_flow:scan": scan_off_when_traced,
    "export:strict": strict_export_off,
    "export:non_strict": non_strict_export_off,
    "export:unflatten": unflattened_export_off,
    "export:compile": exported_module_off_when_traced,
    "cache:warm": fx_graph_cache_stores_nothing,
    "dynamic:dynamic": dynamic_graph_reused_off,
    "dynamic:mark": marked_graph_reused_off,
    "dynamic:maybe_mark": maybe_marked_graph_reused_off,
    "dynamic:unbacked": unbacked_graph_reused_off,
}


def __getattr__(name: str):
    """``<fault>__<backend>``: a backend under a door's planted fault (a repro's BACKEND)."""
    return fault_backend(name, {f.__name__: f for f in FAULTS.values()})
