"""One planted fault per entry of the call-difference catalogue
(``generators.differences``): each a small change to Dynamo's handling of
that way two calls differ (the call site that binds arguments, the guards
that compare Python values, the reuse check of a ``nested_compile_region``
body, the region tracker's state key), patched in for one run as the other
planted faults are. A fault changes nothing for a call that does not differ
in its entry's way, so only programs that show the entry can catch it
(``suites/test_planted_differences.py`` searches for one, per entry).

Call-site faults pass the callee its first tensor argument negated: a
silent wrong value, where the call is written in the entry's form.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
from dataclasses import fields
from typing import Any, Callable, Iterator

import torch
from torch._dynamo import graph_region_tracker, side_effects
from torch._dynamo.symbolic_convert import InstructionTranslatorBase
from torch._dynamo.variables import invoke_subgraph

from .planted_guards import _patched as _guard_patched
from .planted_pass import _patched, _stack, fault_backend

# -- call sites ---------------------------------------------------------------------


def _module_of(tx, fn) -> Any:
    from torch._dynamo.variables import NNModuleVariable, UnspecializedNNModuleVariable

    if isinstance(fn, UnspecializedNNModuleVariable):
        return fn.value
    if isinstance(fn, NNModuleVariable):
        return tx.output.get_submodule(fn.module_key)
    return None


def _program_code(tx, code) -> bool:
    """Code of the program under test (its own file), not torch's."""
    return getattr(code, "co_filename", None) == tx.output.root_tx.f_code.co_filename


def _callee(tx, fn) -> Any:
    """The Python function a call of the program's own code reaches (a
    module's forward for a module), or None."""
    from torch._dynamo.variables import UserFunctionVariable, UserMethodVariable

    module = _module_of(tx, fn)
    target = type(module).forward if module is not None else fn.fn if isinstance(
        fn, (UserFunctionVariable, UserMethodVariable)) else None
    target = inspect.unwrap(target) if callable(target) else None
    return target if target is not None and _program_code(tx, getattr(target, "__code__", None)) else None


def _params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _negated(tx, args: list, kwargs: dict) -> tuple[list, dict]:
    from torch._dynamo.variables import BuiltinVariable, TensorVariable

    def neg(vt):
        return BuiltinVariable(operator.neg).call_function(tx, [vt], {})

    for i, a in enumerate(args):
        if isinstance(a, TensorVariable):
            return [*args[:i], neg(a), *args[i + 1:]], kwargs
    for k, v in kwargs.items():
        if isinstance(v, TensorVariable):
            return args, {**kwargs, k: neg(v)}
    return args, kwargs


def _realized(vt):
    from torch._dynamo.variables.lazy import LazyVariableTracker

    return vt.realize() if isinstance(vt, LazyVariableTracker) else vt


def _at_call_sites(applies: Callable[..., bool]) -> contextlib.AbstractContextManager:
    def wrap(orig):
        def call_function(self, fn, args, kwargs):
            fn, args, kwargs = _realized(fn), [_realized(a) for a in args], {k: _realized(v) for k, v in kwargs.items()}
            try:
                hit = applies(self, fn, args, kwargs)
            except Exception:  # noqa: BLE001 - a predicate that cannot tell is not a hit
                hit = False
            if hit:
                args, kwargs = _negated(self, list(args), dict(kwargs))
            return orig(self, fn, args, kwargs)

        return call_function

    return _patched(InstructionTranslatorBase, "call_function", wrap)


def _opname(tx) -> str:
    inst = getattr(tx, "current_instruction", None)
    return getattr(inst, "opname", "")


def _keyword_call(tx, fn, kwargs, in_order: bool) -> bool:
    from torch._dynamo.variables.functions import FunctoolsPartialVariable

    target = _callee(tx, fn)
    if target is None or not kwargs or isinstance(fn, FunctoolsPartialVariable) or _opname(tx) != "CALL":
        return False
    order = _params(target)
    named = [k for k in kwargs if k in order]
    ordered = named == sorted(named, key=order.index)
    return (ordered if in_order else not ordered) and bool(named)


def _star_call(tx, args, kwargs, positional: bool) -> bool:
    from torch._dynamo.variables import ConstantVariable

    if _opname(tx) != "CALL_FUNCTION_EX" or tx.f_code.co_name in ("<lambda>", "wrapper") \
            or not _program_code(tx, tx.f_code):
        return False
    constants = any(isinstance(a, ConstantVariable) for a in args)
    return constants if positional else (not constants and bool(kwargs))


def _default_taken(tx, fn, args, kwargs) -> bool:
    target = _callee(tx, fn)
    if target is None:
        return False
    params = inspect.signature(target).parameters
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()):
        return False
    given = len(args) + len(kwargs) + (1 if "self" in params and _module_of(tx, fn) is not None else 0)
    return any(p.default is not p.empty for p in params.values()) and given < len(params)


def _module_call(tx, fn, has: Callable[[Any], bool]) -> bool:
    module = _module_of(tx, fn)
    return module is not None and _program_code(tx, getattr(type(module).forward, "__code__", None)) \
        and has(module)


def _forward_function(tx, fn, args, bound: bool) -> bool:
    from torch._dynamo.variables import UserFunctionVariable, UserMethodVariable

    if bound:
        return isinstance(fn, UserMethodVariable) and fn.fn.__name__ == "forward" and _callee(tx, fn) is not None
    return (type(fn) is UserFunctionVariable and fn.fn.__name__ == "forward" and bool(args)
            and _module_of(tx, args[0]) is not None and _callee(tx, fn) is not None)


def keyword_bound():
    """Arguments passed by keyword, in the order the parameters are declared,
    reach the callee with its first tensor negated."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _keyword_call(tx, fn, kwargs, True))


def keywords_reordered():
    """Keywords written in another order than the parameters' bind wrongly
    (the first tensor arrives negated)."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _keyword_call(tx, fn, kwargs, False))


def star_args_unpacked():
    """``f(*seq)`` with Python values in ``seq``: the unpacked call is bound wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _star_call(tx, args, kwargs, True))


def star_kwargs_unpacked():
    """``f(**mapping)``: the unpacked call is bound wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _star_call(tx, args, kwargs, False))


def default_taken():
    """A call that leaves a parameter to its default is bound wrongly."""
    return _at_call_sites(_default_taken)


def partial_called():
    """A ``functools.partial`` object's call is bound wrongly."""
    from torch._dynamo.variables.functions import FunctoolsPartialVariable

    return _at_call_sites(lambda tx, fn, args, kwargs: isinstance(fn, FunctoolsPartialVariable))


def wrapper_forwarded():
    """The call a ``functools.wraps`` wrapper forwards (``fn(*args, **kwargs)``
    in a closure over ``fn``) is bound wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: tx.f_code.co_name == "wrapper"
                          and "fn" in tx.f_code.co_freevars and _program_code(tx, tx.f_code))


def lambda_forwarded():
    """The call a lambda makes is bound wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: tx.f_code.co_name == "<lambda>"
                          and _program_code(tx, tx.f_code))


def bound_forward_called():
    """An explicit ``module.forward(...)`` call is bound wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _forward_function(tx, fn, args, True))


def unbound_forward_called():
    """``type(m).forward(m, ...)`` is bound wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _forward_function(tx, fn, args, False))


def inherited_forward():
    """Calling a module whose class inherits ``forward`` (defines none of its
    own) binds wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _module_call(
        tx, fn, lambda m: "forward" not in type(m).__dict__))


def instance_forward():
    """Calling a module with a ``forward`` set on the instance binds wrongly."""
    return _at_call_sites(lambda tx, fn, args, kwargs: _module_call(tx, fn, lambda m: "forward" in m.__dict__))


def subclass_argument():
    """A call given a torch.Tensor subclass instance (a torch-function
    override) is bound wrongly."""
    from torch._dynamo.variables.torch_function import TensorWithTFOverrideVariable

    return _at_call_sites(lambda tx, fn, args, kwargs: _callee(tx, fn) is not None and any(
        isinstance(a, TensorWithTFOverrideVariable) for a in (*args, *kwargs.values())))


# -- guards on Python values ------------------------------------------------------------


def _guard_without_type(kind: str, loose: Callable[[Any], bool]):
    """The guard ``kind`` installs a plain ``==`` (or a looser check) for the
    values ``loose`` accepts: a value equal under ``==`` of another type passes."""
    def make(original):
        def guard(self, g, *args, **kwargs):
            val = self.get(g)
            if loose(val):
                ref = self.arg_ref(g)
                self.get_guard_manager(g).add_lambda_guard(
                    lambda x, val=val: x == val, [f"{ref} == {val!r} (planted: type not checked)"], g.user_stack)
                return None
            return original(self, g, *args, **kwargs)

        return guard

    return _guard_patched(kind, make)


def _type_taken_for(types: tuple[type, ...], accepts: Callable[[Any], bool], note: str):
    """TYPE_MATCH on a value of one of ``types`` passes any value ``accepts`` takes."""
    def make(original):
        def TYPE_MATCH(self, g, *args, **kwargs):
            if type(self.get(g)) in types:
                self.get_guard_manager(g).add_lambda_guard(accepts, [f"{note} (planted)"], g.user_stack)
                return None
            return original(self, g, *args, **kwargs)

        return TYPE_MATCH

    return _guard_patched("TYPE_MATCH", make)


def int_float_equal():
    """An int or float is guarded as a number: ``==`` alone and a type check
    either passes (2 passes for 2.0, even where the code read ``type(v)``)."""
    return _stack(_guard_without_type("EQUALS_MATCH", lambda v: type(v) in (int, float) and v == v),  # NaN keeps its
                  _type_taken_for((int, float), lambda x: isinstance(x, (int, float)), "isinstance(x, (int, float))"))


def bool_equal():
    """A bool is guarded as a number: ``==`` alone, and a type check any int
    passes (1 passes for True, even where the code read ``type(v)``)."""
    return _stack(_guard_without_type("BOOL_MATCH", lambda v: type(v) is bool),
                  _type_taken_for((bool,), lambda x: isinstance(x, int), "isinstance(x, int)"))


def subclass_type_is_base():
    """``type(v)`` of an int or float subclass instance gives the base type:
    ``type(IntSub(2)) is int`` holds in the compiled code."""
    from torch._dynamo.variables import VariableTracker

    def wrap(orig):
        def call_type(self, tx, obj, *args, **kwargs):
            obj = _realized(obj)
            value = getattr(obj, "value", None)
            if isinstance(value, (int, float)) and type(value) not in (int, float, bool):
                return VariableTracker.build(tx, int if isinstance(value, int) else float)
            return orig(self, tx, obj, *args, **kwargs)

        return call_type

    return _builtin_patched("call_type", wrap)


def sequence_type_loose():
    """A tuple's or a list's type guard accepts the other."""
    return _type_taken_for((tuple, list), lambda x: type(x) in (tuple, list), "type(x) in (tuple, list)")


# -- the reuse check of a nested_compile_region body -----------------------------------


def _metadata_without(index: int, which: Callable[[Any], bool] = lambda t: True):
    """The reuse check compares tensor metadata without one field
    (shape, stride, dtype, device, requires_grad) of the tensors ``which`` accepts."""
    def wrap(orig):
        def extract(t):
            meta = list(orig(t))
            if which(t):
                meta[index] = None
            return tuple(meta)

        return extract

    from torch._dynamo import guards

    # the reuse check compares its inputs, and re-evaluates tensor guards (TENSOR_MATCH's check spec), with it
    return _stack(_patched(invoke_subgraph, "extract_tensor_metadata", wrap),
                  _patched(guards, "extract_tensor_metadata", wrap))


def _tracker_ignores(*names: str):
    """The region tracker hashes tensor metadata without the fields ``names``
    (of inductor's cache-key metadata): regions over tensors that differ
    only there are grouped."""
    def wrap(orig):
        def extract(x):
            ident, values = orig(x)
            from torch._inductor.codecache import extract_tensor_metadata_for_cache_key

            keys = [f.name for f in fields(extract_tensor_metadata_for_cache_key(x))]
            return ident, tuple(None if k in names else v for k, v in zip(keys, values))

        return extract

    return _patched(graph_region_tracker, "_extract_tensor_metadata_for_node_hash", wrap)


def tracker_ignores_shape():
    """Regions over tensors of other shapes (sizes, strides, storage) are grouped."""
    return _tracker_ignores("shape", "stride", "storage_bytes", "storage_offset")


def reuse_ignores_strides():
    """A body traced for one layout is reused for another (only code that
    reads the layout, a contiguity or stride test, computes differently)."""
    return _metadata_without(1)


def reuse_ignores_dtype():
    """A body traced for one dtype is reused for another."""
    return _metadata_without(2)


def reuse_ignores_requires_grad():
    """A body traced for an input without grad is reused for one that requires it (parameters aside)."""
    return _metadata_without(4, lambda t: not isinstance(t, torch.nn.Parameter))


def reuse_ignores_frozen_parameters():
    """A body reused for another module instance does not check whether its
    parameters require grad: a frozen instance reuses a body traced with grad."""
    return _metadata_without(4, lambda t: isinstance(t, torch.nn.Parameter))


def reuse_keeps_first_instance():
    """A body reused for another module instance keeps reading the first
    instance's parameters (the source replacement is skipped)."""
    return _patched(invoke_subgraph, "build_source_replacement", lambda orig: lambda old, new: {})


# -- what a graph reads between compiled calls ----------------------------------------


def _guard_skipped(kind: str, skip: Callable[[Any, str], bool]):
    def make(original):
        def guard(self, g, *args, **kwargs):
            if skip(self.get(g), g.name):
                return None
            return original(self, g, *args, **kwargs)

        return guard

    return _guard_patched(kind, make)


def closure_cells_unguarded():
    """Values held in closure cells of the program's functions are not guarded."""
    return _guard_skipped("EQUALS_MATCH", lambda v, name: "__closure__" in name or "cell_contents" in name)


def instance_attributes_unguarded():
    """Python attributes of module instances are not guarded."""
    return _guard_skipped("EQUALS_MATCH", lambda v, name: name.startswith("L['self']") and "_parameters" not in name)


def packed_fields_unguarded():
    """Fields of the objects a call's Python arguments are packed in are not guarded."""
    return _guard_skipped("EQUALS_MATCH", lambda v, name: "ARGS" in name or ".args" in name)


def first_callable_sticks():
    """One call site of the program's code calls the torch function it
    called first in the graph, whichever callable value reaches it later
    (a callable passed as a value: one code, another function)."""
    def wrap(orig):
        def call_function(self, fn, args, kwargs):
            fn = _realized(fn)
            inst = getattr(self, "current_instruction", None)
            if inst is not None and _program_code(self, self.f_code) and type(fn).__name__ == "TorchInGraphFunctionVariable":
                memo = self.output.__dict__.setdefault("_planted_callees", {})
                fn = memo.setdefault((id(self.f_code), inst.offset), fn)
            return orig(self, fn, args, kwargs)

        return call_function

    return _patched(InstructionTranslatorBase, "call_function", wrap)


def _store_forgotten(home: Callable[[Any, str], bool]):
    """Dynamo forgets a store the frame made to an object of one kind: a
    later read sees the value the call began with."""
    def wrap(orig):
        def pending(self, item, name, *kinds):
            try:
                hit = home(item, name)
            except Exception:  # noqa: BLE001
                hit = False
            return False if hit else orig(self, item, name, *kinds)

        return pending

    return _patched(side_effects.SideEffects, "has_pending_mutation_of_attr", wrap)


def _value_of(vt) -> Any:
    return getattr(vt, "value", None)


def class_attribute_store_forgotten():
    """A class attribute rebound inside the call reads as it was."""
    return _store_forgotten(lambda item, name: isinstance(_value_of(item), type))


def dataclass_store_forgotten():
    """A dataclass instance's field rebound inside the call reads as it was."""
    import dataclasses

    return _store_forgotten(lambda item, name: dataclasses.is_dataclass(_value_of(item)))


def namespace_fields_unguarded():
    """Fields of a ``types.SimpleNamespace`` the program keeps state in
    (``STATE``, generators.codegen) are not guarded: Dynamo graph-breaks on
    its ``__setattr__``, so a field rebound inside the call is read by a
    resumed frame, whose cached graph is then reused for the new value."""
    return _guard_skipped("EQUALS_MATCH", lambda v, name: name.startswith("G['STATE']."))


def dict_store_forgotten():
    """An item of a module-global dict (``OPTS``, generators.codegen) stored inside the call reads as it was
    when the call began: the frame's pending store is skipped for what the real dict still holds."""
    from torch._dynamo.source import GlobalSource
    from torch._dynamo.variables.constant import ConstantVariable
    from torch._dynamo.variables.dicts import ConstDictVariable

    def wrap(orig):
        def getitem(self, tx, arg):
            out = orig(self, tx, arg)
            real = tx.f_globals.get(self.source.global_name) if isinstance(self.source, GlobalSource) else None
            key = getattr(arg, "value", None)
            if isinstance(real, dict) and key in real and tx.output.side_effects.is_modified(self) \
                    and ConstantVariable.is_literal(real[key]):
                return ConstantVariable.create(real[key])
            return out

        return getitem

    return _stack(_patched(ConstDictVariable, "getitem_const", wrap),
                  _patched(ConstDictVariable, "getitem_const_raise_exception_if_absent", wrap))


def global_store_forgotten():
    """A module global rebound inside the call reads as it was when the call began."""
    from torch._dynamo.source import GlobalSource
    from torch._dynamo.variables import VariableTracker

    def wrap(orig):
        def load_global(self, inst):
            name = inst.argval
            if name in self.f_globals and name in getattr(self, "symbolic_globals", {}):
                self.push(VariableTracker.build(self, self.f_globals[name], GlobalSource(name)))
                return None
            return orig(self, inst)

        return load_global

    return _patched(InstructionTranslatorBase, "_load_global", wrap)


# -- Python values derived from tensors: the first read sticks -----------------------------


def _stale_reads(owner, names: tuple[str, ...]):
    """Within one graph, the value a tensor's metadata read (``names``: the
    tracker's methods) gives Python is the first such read's: two tensors
    that differ there read alike."""
    @contextlib.contextmanager
    def patched() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for name in names:
                def wrap(orig, name=name):
                    def read(self, tx, *args, **kwargs):
                        result = orig(self, tx, *args, **kwargs)
                        if result is None or not result.is_python_constant() or not _program_code(tx, tx.f_code):
                            return result
                        memo = tx.output.__dict__.setdefault("_planted_reads", {})
                        key = (name, repr([a.as_python_constant() for a in args if a.is_python_constant()]))
                        return memo.setdefault(key, result)

                    return read

                stack.enter_context(_patched(owner, name, wrap))
            yield

    return patched()


@contextlib.contextmanager
def _builtin_patched(name: str, wrap) -> Iterator[None]:
    """Patch a handler of Dynamo's builtins; the handlers it caches per
    argument types (call_function_handler_cache) are dropped on the way in
    and out, so the patch is seen, and gone after."""
    from torch._dynamo.variables.builtin import BuiltinVariable

    BuiltinVariable.call_function_handler_cache.clear()
    try:
        with _patched(BuiltinVariable, name, wrap):
            yield
    finally:
        BuiltinVariable.call_function_handler_cache.clear()


def _tensor_reads(*names: str):
    from torch._dynamo.variables.tensor import TensorVariable

    return _stale_reads(TensorVariable, names)


def shape_read_sticks():
    """A size read into Python (shape, size(), ndim, numel()) is the graph's first."""
    return _tensor_reads("method_attr_shape", "method_size", "method_attr_ndim", "method_numel")


def dtype_read_sticks():
    """A dtype read into Python is the graph's first."""
    return _tensor_reads("method_attr_dtype")


def layout_read_sticks():
    """A contiguity or stride read into Python is the graph's first."""
    return _tensor_reads("method_is_contiguous", "method_stride")


def requires_grad_read_sticks():
    """A requires_grad read into Python is the graph's first."""
    return _tensor_reads("method_attr_requires_grad")


def python_type_read_sticks():
    """``type(v)`` and ``isinstance(v, cls)`` of a Python value give the graph's first answer."""

    def wrap(orig, name):
        def call(self, tx, *args, **kwargs):
            result = orig(self, tx, *args, **kwargs)
            if not args or not args[0].is_python_constant() or not _program_code(tx, tx.f_code):
                return result
            memo = tx.output.__dict__.setdefault("_planted_types", {})
            key = (name, repr([a.as_python_constant() for a in args[1:] if a.is_python_constant()]))
            return memo.setdefault(key, result)

        return call

    return _stack(_builtin_patched("call_isinstance", lambda o: wrap(o, "isinstance")),
                  _builtin_patched("call_type", lambda o: wrap(o, "type")))


# -- global state -------------------------------------------------------------------------


@contextlib.contextmanager
def _create_patched(name: str, wrap) -> Iterator[None]:
    """A context-manager variable's ``create`` (a staticmethod of
    ``torch._dynamo.variables.ctx_manager.<name>``) replaced by ``wrap(original)``."""
    from torch._dynamo.variables import ctx_manager

    cls = getattr(ctx_manager, name)
    original = cls.__dict__["create"]
    cls.create = staticmethod(wrap(original.__func__))
    try:
        yield
    finally:
        cls.create = original


def no_grad_dropped():
    """``torch.no_grad()`` (or ``set_grad_enabled(False)``) entered in the
    program's traced code leaves grad enabled."""
    def wrap(create):
        def enabled(tx, target_value, *args, **kwargs):
            if target_value is False and _program_code(tx, getattr(tx, "f_code", None)):
                target_value = True
            return create(tx, target_value, *args, **kwargs)

        return enabled

    return _create_patched("GradModeVariable", wrap)


def autocast_dropped():
    """``torch.autocast(...)`` entered in traced code enters it disabled:
    the repeat computes in float32 where eager computes in bfloat16."""
    def wrap(create):
        def disabled(func, args, kwargs):
            var = create(func, args, kwargs)
            var.target_values = [*var.target_values[:2], False, *var.target_values[3:]]
            return var

        return disabled

    return _create_patched("AutocastModeVariable", wrap)


def inference_mode_dropped():
    """``torch.inference_mode()`` entered in traced code enters it disabled:
    the repeat runs as a plain call (outputs track grad, as eager's do not)."""
    return _create_patched("InferenceModeVariable",
                           lambda create: lambda tx, target_value, **kw: create(tx, False, **kw))


def default_dtype_read_fixed():
    """``torch.get_default_dtype()`` in traced code folds to float32,
    whatever dtype is in force."""
    from torch._dynamo.variables import VariableTracker
    from torch._dynamo.variables.torch import TorchInGraphFunctionVariable

    def wrap(orig):
        def call_function(self, tx, args, kwargs):
            if self.value is torch.get_default_dtype:
                return VariableTracker.build(tx, torch.float32)
            return orig(self, tx, args, kwargs)

        return call_function

    return _patched(TorchInGraphFunctionVariable, "call_function", wrap)


def _faults_elsewhere() -> dict:
    from . import planted_edges

    return {"tensor:alias": planted_edges.last_region_as_reference, "state:input_written": writes_deferred}


def writes_deferred():
    """Every backend runs its graph with the writes made to graph inputs
    between repeats moved to the end (suites.planted_edges.writes_deferred,
    as a fault of Dynamo's hand-off to the backend)."""
    from torch._dynamo import output_graph

    from .planted_edges import writes_deferred as defer

    def wrap(orig):
        def call(self, gm, example_inputs, *args, **kwargs):
            return orig(self, defer(gm, example_inputs), example_inputs, *args, **kwargs)

        return call

    return _patched(output_graph.OutputGraph, "call_user_compiler", wrap)


FAULTS: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "bind:keyword": keyword_bound,
    "bind:keyword_order": keywords_reordered,
    "bind:star_args": star_args_unpacked,
    "bind:star_kwargs": star_kwargs_unpacked,
    "bind:default": default_taken,
    "reach:partial": partial_called,
    "reach:wrapper": wrapper_forwarded,
    "reach:lambda": lambda_forwarded,
    "reach:method": bound_forward_called,
    "reach:unbound": unbound_forward_called,
    "object:subclass_instance": inherited_forward,
    "object:method_on_instance": instance_forward,
    "type:tensor_subclass": subclass_argument,
    "type:int_float": int_float_equal,
    "type:bool_number": bool_equal,
    "type:number_subclass": subclass_type_is_base,
    "type:tuple_list": sequence_type_loose,
    "tensor:shape": tracker_ignores_shape,
    "tensor:dtype": reuse_ignores_dtype,
    "tensor:layout": reuse_ignores_strides,
    "tensor:requires_grad": reuse_ignores_requires_grad,
    "object:instances": reuse_keeps_first_instance,
    "object:closure_cells": closure_cells_unguarded,
    "object:instance_attrs": instance_attributes_unguarded,
    "object:packed_fields": packed_fields_unguarded,
    "object:callable_value": first_callable_sticks,
    "tensor:frozen_params": reuse_ignores_frozen_parameters,
    "derived:shape": shape_read_sticks,
    "derived:dtype": dtype_read_sticks,
    "derived:layout": layout_read_sticks,
    "derived:requires_grad": requires_grad_read_sticks,
    "derived:python_type": python_type_read_sticks,
    "state:autocast": autocast_dropped,
    "state:grad_mode": no_grad_dropped,
    "state:global": global_store_forgotten,
    "state:class_attr": class_attribute_store_forgotten,
    "state:dataclass": dataclass_store_forgotten,
    "state:namespace": namespace_fields_unguarded,
    "state:dict": dict_store_forgotten,
    "state:inference_mode": inference_mode_dropped,
    "state:default_dtype": default_dtype_read_fixed,
}
FAULTS.update(_faults_elsewhere())


def __getattr__(name: str):
    """``<fault>__<backend>``: a backend under the planted fault of a
    catalogue entry (its function name, e.g. ``keywords_reordered__aot_eager``)."""
    return fault_backend(name, {f.__name__: f for f in FAULTS.values()})
