"""Which graph nodes write to their arguments, decided from the node alone.

The dedup pass learns mutations from tensor version counters while tracing;
the structural oracles need their own answer, so this module reads it off the
op: a schema's write annotations, a trailing-underscore method or function,
``operator.setitem`` and the in-place dunders, ``inplace=True``, ``out=``,
and batch and instance norm updating their running statistics.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.fx import Node

_INPLACE_OPERATORS = {
    operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
    operator.ifloordiv, operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
    operator.ilshift, operator.irshift, operator.imatmul,
}


def _batch_norm(node: Node) -> list[Any]:
    """F.batch_norm(input, running_mean, running_var, weight, bias, training, ...)."""
    training = node.kwargs.get("training", node.args[5] if len(node.args) > 5 else False)
    if not training:
        return []
    names = ("running_mean", "running_var")
    return [node.kwargs.get(n, node.args[i + 1] if len(node.args) > i + 1 else None) for i, n in enumerate(names)]


def _instance_norm(node: Node) -> list[Any]:
    """F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, ...): it updates the
    running statistics it is given while it uses the input's (the default)."""
    if not node.kwargs.get("use_input_stats", node.args[5] if len(node.args) > 5 else True):
        return []
    names = ("running_mean", "running_var")
    return [node.kwargs.get(n, node.args[i + 1] if len(node.args) > i + 1 else None) for i, n in enumerate(names)]


def _torch_instance_norm(node: Node) -> list[Any]:
    """torch.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, ...)."""
    args = node.args
    return [args[3], args[4]] if len(args) > 5 and args[5] else []


# call_function targets with their own rule: target -> written arguments.
_SPECIAL: dict[Any, Callable[[Node], list[Any]]] = {
    F.batch_norm: _batch_norm,
    torch.batch_norm: lambda n: _batch_norm(n) if len(n.args) > 5 else [],
    F.instance_norm: _instance_norm,
    torch.instance_norm: _torch_instance_norm,
}


def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def _is_inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.startswith("_")


def written_args(node: Node) -> list[Node]:
    """The argument nodes this node writes to in place."""
    if node.op not in ("call_function", "call_method"):
        return []
    target = node.target
    written: list[Any] = []
    if isinstance(target, torch._ops.OpOverload):
        for i, arg in enumerate(target._schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                written.append(node.kwargs.get(arg.name, node.args[i] if i < len(node.args) else None))
    elif target in _SPECIAL:
        written = _SPECIAL[target](node)
    elif target in _INPLACE_OPERATORS or _is_inplace_name(_name(target)):
        written = [node.args[0]] if node.args else []
    elif node.kwargs.get("inplace") is True:
        written = [node.args[0]] if node.args else []
    if "out" in node.kwargs:
        written.append(node.kwargs["out"])
    return [w for w in written if isinstance(w, Node)]


def storage_key(value: Any) -> Any:
    """Identity of a (fake) tensor's storage: views of one tensor share it."""
    if not isinstance(value, torch.Tensor):
        return None
    try:
        from torch.multiprocessing.reductions import StorageWeakRef

        return StorageWeakRef(value.untyped_storage())
    except Exception:  # sparse, or a subclass without storage
        return None


def example_value(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, Node) else None
