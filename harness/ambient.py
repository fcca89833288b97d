"""Global state an op is traced under, as a catalogue.

Two ops are interchangeable only if they run under the same grad mode,
autocast state, default dtype and the other process-wide flags that change
what an op computes. The harness records this state itself for every node
Dynamo creates (see ``harness.structure``) rather than trusting the pass's
own key, which omits autocast.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


def _autocast(device: str) -> Callable[[], Any]:
    def get() -> Any:
        return str(torch.get_autocast_dtype(device)) if torch.is_autocast_enabled(device) else None

    return get


# name -> how to read it now. Adding a flag is one entry.
AMBIENT: dict[str, Callable[[], Any]] = {
    "grad": torch.is_grad_enabled,
    "inference": torch.is_inference_mode_enabled,
    "autocast_cpu": _autocast("cpu"),
    "autocast_cuda": _autocast("cuda"),
    "autocast_cache": torch.is_autocast_cache_enabled,
    "default_dtype": lambda: str(torch.get_default_dtype()),
    "deterministic": torch.are_deterministic_algorithms_enabled,
    "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled,
    "saved_tensors_hooks": torch._C._autograd._saved_tensors_hooks_is_enabled,
    "fp16_reduced_precision": torch._C._get_cublas_allow_fp16_reduced_precision_reduction,
    "bf16_reduced_precision": torch._C._get_cublas_allow_bf16_reduced_precision_reduction,
    "tf32": torch._C._get_cublas_allow_tf32,
    "num_threads": torch.get_num_threads,
}


def ambient_state() -> dict[str, Any]:
    return {name: get() for name, get in AMBIENT.items()}


# --- graph nodes that change the state for the nodes after them ---------------
# target -> effect on the replayed state (grad and autocast, the fields a
# Dynamo graph sets explicitly). Used to replay a graph in order and tell
# which state each node will run under.


def _set_grad(state: dict, stack: list, node: torch.fx.Node) -> None:
    state["grad"] = bool(node.args[0])


def _enter_autocast(state: dict, stack: list, node: torch.fx.Node) -> None:
    stack.append(dict(state))
    device, dtype, enabled = (list(node.args) + [None, None, True])[:3]
    if enabled:
        dtype = dtype or (torch.bfloat16 if device == "cpu" else torch.float16)
        state[f"autocast_{device}"] = str(dtype)
    else:
        state[f"autocast_{device}"] = None


def _enter_inference(state: dict, stack: list, node: torch.fx.Node) -> None:
    stack.append(dict(state))
    if node.args and node.args[0]:
        state["grad"] = False


def _exit(state: dict, stack: list, node: torch.fx.Node) -> None:
    if stack:
        saved = stack.pop()
        for k in ("grad", "autocast_cpu", "autocast_cuda"):
            state[k] = saved.get(k)


STATE_NODES: dict[Any, Callable[[dict, list, torch.fx.Node], None]] = {
    torch._C._set_grad_enabled: _set_grad,
    torch.amp._enter_autocast: _enter_autocast,
    torch.amp._exit_autocast: _exit,
    torch.autograd.grad_mode._enter_inference_mode: _enter_inference,
    torch.autograd.grad_mode._exit_inference_mode: _exit,
}

# The fields the replay can tell; others are compared from the recording only.
REPLAYED = ("grad", "autocast_cpu", "autocast_cuda")


def is_state_node(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in STATE_NODES


def replay(graph: torch.fx.Graph, entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The replayed state each node of ``graph`` runs under, by node name."""
    state = {k: entry.get(k) for k in REPLAYED}
    stack: list = []
    out = {}
    for node in graph.nodes:
        out[node.name] = dict(state)
        if is_state_node(node):
            STATE_NODES[node.target](state, stack, node)
    return out
