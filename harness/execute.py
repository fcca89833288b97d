"""Run a model forward and backward, turning exceptions into values."""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Any, Callable

import torch
import torch._dynamo.exc as dynamo_exc
from torch.utils._pytree import tree_flatten

from generators.autograd import CONTEXT, DRIVE, TRACE
from generators.codegen import PYTHON_STATE, RESET_STATE

from .clock import in_torch
from .outcome import Execution, Failure

# Exception classes Dynamo raises, mapped to the stage they name; first match wins.
STAGES: tuple[tuple[type, str], ...] = (
    (dynamo_exc.BackendCompilerFailed, "backend_compile"),
    (dynamo_exc.TorchDynamoException, "dynamo"),
)


# The context each mode (harness.backend_capabilities.MODES) runs a program's calls under.
MODE_CONTEXTS: dict[str, Callable] = {
    "train": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def mode_context(mode: str):
    return MODE_CONTEXTS[mode]()


def first_line(exc: BaseException) -> str:
    """The line of an exception's message that names the error (rendered
    into crash repros too, so both read a crash alike)."""
    import os
    import traceback

    text = str(exc).split("from user code:")[0]  # Dynamo appends where in the user's code
    hints = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context")  # and how to log more (2.10)
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith(hints)]
    message = lines[0] if lines else ""
    if message.endswith("raised:") and len(lines) > 1:  # BackendCompilerFailed: the error is on the next line
        message = f"{message} {lines[1]}"
    # a higher-order operator's body that could not be traced whole: the next line names the graph break
    # (aliasing, a data-dependent shape, ...), each its own cause
    if message.endswith("Got graph break/error:") and len(lines) > 1:
        message = f"{message} {lines[1].strip()}"
    if message.endswith("C++ compile error"):  # inductor's C++ build failed: the compiler's first error says which
        import re

        found = re.search(r":\d+:\d+: ((?:fatal |internal compiler )?error: .*)", text)
        message = f"{message}: {found.group(1).strip()}" if found else message
    if message.endswith("raised:") or not message:  # a bare assert: name where it fired
        inner = exc
        while inner.__cause__ is not None:
            inner = inner.__cause__
        frames = traceback.extract_tb(inner.__traceback__)
        where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].name}" if frames else "?"
        message = f"{message} {type(inner).__qualname__} in {where}".strip()
    return message


def _raised_in_dynamo(exc: BaseException) -> bool:
    """An unwrapped error of Dynamo's own (before torch 2.8 an assert in the
    pass reached the caller bare): raised in torch/_dynamo while converting a frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and "/torch/_dynamo/" in frames[-1].filename.replace("\\", "/") and any(
        f.filename.endswith("convert_frame.py") for f in frames)


def failure(exc: BaseException, default_stage: str) -> Failure:
    stage = next((s for cls, s in STAGES if isinstance(exc, cls)), None)
    stage = stage or ("dynamo" if _raised_in_dynamo(exc) else default_stage)
    message = first_line(exc)
    return Failure(
        stage=stage,
        type=type(exc).__qualname__,
        message=message[:2000],  # a long message may end by naming what it is about (signature.normalize)
        traceback="".join(traceback.format_exception(exc))[-8000:],
    )


def cotangent(leaf: torch.Tensor, index: int) -> torch.Tensor:
    """The same values for every run of a program, whatever its dtype."""
    g = torch.Generator().manual_seed(1_000 + index)
    return torch.randn(leaf.shape, generator=g, dtype=torch.float32, device="cpu").to(leaf.device, leaf.dtype)


def as_float64(inputs: list) -> list:
    """Floating inputs as float64 leaves (requires_grad kept), others as they are."""
    return as_dtype(inputs, torch.float64)


def as_dtype(inputs: list, dtype: torch.dtype) -> list:
    """Floating inputs as leaves of ``dtype`` (requires_grad kept), others as they are."""
    return [t.detach().to(dtype).requires_grad_(t.requires_grad) if t.is_floating_point() else t for t in inputs]


def _snapshot(x: Any) -> Any:
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def execute(
    fn: Callable,
    model: torch.nn.Module,
    inputs: list[torch.Tensor],
    input_names: list[str],
    backward: bool = True,
    kwargs: dict | None = None,
    hold: list | None = None,
) -> Execution:
    """``hold``, if given, receives ``(where, tensor)`` for every output and
    gradient as the run produced it (not a copy): CUDA graphs may overwrite
    those later (harness.replay)."""
    trace, context, drive = autograd_of(model)
    trace.clear()
    module = program_module(model)
    reset, read = getattr(module, RESET_STATE, None), getattr(module, PYTHON_STATE, None)
    if reset is not None:  # every run starts from the program's own values (generators.codegen.PYTHON_STATE)
        reset()
    with context():
        result = _execute(fn, model, inputs, input_names, backward, kwargs, hold, trace, drive)
    if read is not None and result.failure is None:
        result.state.update({f"python:{k}": v for k, v in ((k, python_value(v)) for k, v in read().items())
                             if v is not None})
    return result


def python_value(value: Any) -> torch.Tensor | None:
    """A Python value the forward left behind, as a float64 tensor the oracles compare like any state: a
    number (bool, int, float: NaN and a zero's sign kept), numbers in a tuple or list, a string or None by a
    checksum of its text; None for what has no value of its own to compare (a function object)."""
    import zlib

    def number(v: Any) -> bool:
        return isinstance(v, (bool, int, float))

    if number(value):
        return torch.tensor(float(value), dtype=torch.float64)
    if isinstance(value, (tuple, list)) and all(number(v) for v in value):
        return torch.tensor([float(v) for v in value], dtype=torch.float64)
    if value is None or isinstance(value, str):
        return torch.tensor(float(zlib.crc32(repr(value).encode())), dtype=torch.float64)
    return None


def program_module(model: torch.nn.Module):
    """The module that defines the model (each load of a program's source is one of its own: harness.loader)."""
    return sys.modules.get(type(model).__module__)


def autograd_of(model: torch.nn.Module):
    """The trace list, the context and the drive of the program's autograd features
    (generators.autograd), read from the module that defines the model: a list of its own, no
    context and the plain backward where it has none."""
    module = program_module(model)
    trace = getattr(module, TRACE, None)
    return (trace if isinstance(trace, list) else [], getattr(module, CONTEXT, contextlib.nullcontext),
            getattr(module, DRIVE, None))


def _versions(model: torch.nn.Module, inputs: list, names: list[str]) -> dict[str, tuple[torch.Tensor, int]]:
    """Each input, buffer and parameter tensor with its version counter (an inference tensor has none)."""
    tensors = [(f"input:{n}", t) for n, t in zip(names, inputs)]
    tensors += [(f"buffer:{n}", b) for n, b in model.named_buffers()]
    tensors += [(f"param:{n}", p) for n, p in model.named_parameters()]
    out = {}
    for name, t in tensors:
        if isinstance(t, torch.Tensor) and not t.is_inference():
            out.setdefault(name, (t, t._version))
    return out


def _written(before: dict[str, tuple[torch.Tensor, int]], model: torch.nn.Module) -> list[str]:
    """The tensors of ``before`` whose version moved; a buffer or parameter rebound to another tensor is no write
    of the one it held."""
    now = {f"buffer:{n}": b for n, b in model.named_buffers()} | {f"param:{n}": p for n, p in model.named_parameters()}
    return sorted(name for name, (t, version) in before.items()
                  if now.get(name, t) is t and t._version != version)


def _execute(fn, model, inputs, input_names, backward, kwargs, hold, trace, drive) -> Execution:
    before = _versions(model, inputs, input_names)
    try:
        with in_torch():
            out = fn(*inputs, **(kwargs or {}))
    except Exception as e:  # the compiler under test may raise anything
        return Execution(failure=failure(e, "runtime"))
    written = _written(before, model)
    forward = len(trace)
    leaves, spec = tree_flatten(out)
    result = Execution(
        outputs=[_snapshot(x) for x in leaves],
        requires_grad=[isinstance(x, torch.Tensor) and x.requires_grad for x in leaves],
        treespec=str(spec),
        aliases=aliases(leaves, inputs, input_names),
        written=written,
    )
    if backward:
        pairs = [
            (x, cotangent(x, i))
            for i, x in enumerate(leaves)
            if isinstance(x, torch.Tensor) and x.requires_grad
        ]
        if pairs:
            outs, cots = [x for x, _ in pairs], [c for _, c in pairs]
            try:
                with in_torch():
                    if drive is None:
                        torch.autograd.backward(outs, cots)
                    else:
                        wanted = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
                        wanted += [p for p in model.parameters() if p.requires_grad]
                        drive(outs, cots, wanted, [t for t in inputs if isinstance(t, torch.Tensor)])
            except Exception as e:
                result.failure = failure(e, "backward")
    result.trace = [("forward" if i < forward else "backward", label, value) for i, (label, value) in enumerate(trace)]
    trace.clear()
    tensors = [(n, t) for n, t in zip(input_names, inputs) if isinstance(t, torch.Tensor)]
    result.state = {f"input:{n}": t.detach().clone() for n, t in tensors}
    result.state.update({f"buffer:{n}": b.detach().clone() for n, b in model.named_buffers()})
    result.grads = {f"input:{n}": _grad(t) for n, t in tensors if t.requires_grad}
    result.grads.update({f"param:{n}": _grad(p) for n, p in model.named_parameters() if p.requires_grad})
    if hold is not None:
        hold += [(f"output[{i}]", x) for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        live = [(f"input:{n}", t) for n, t in tensors] + [(f"param:{n}", p) for n, p in model.named_parameters()]
        hold += [(f"grad[{k}]", t.grad) for k, t in live if t.grad is not None]
    return result


def _storage(x) -> int | None:
    """The storage a tensor's data lives in (None: no storage to share: not a tensor, or empty)."""
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
        return None
    try:
        storage = x.untyped_storage()
    except (RuntimeError, NotImplementedError):  # a wrapper subclass without storage of its own
        return None
    return storage.data_ptr() if storage.nbytes() else None


def aliases(leaves: list, inputs: list, names: list[str]) -> list[str]:
    """What each output shares storage with: a program input, or an earlier output
    (a view, the tensor itself); what a user who writes to an output sees change."""
    owners = {}
    for n, t in zip(names, inputs):
        key = _storage(t)
        if key is not None:
            owners.setdefault(key, f"input:{n}")
    out = []
    for i, x in enumerate(leaves):
        key = _storage(x)
        out.append("" if key is None else owners.get(key, ""))
        if key is not None:
            owners.setdefault(key, f"output[{i}]")
    return out


def _grad(t: torch.Tensor) -> torch.Tensor | None:
    return None if t.grad is None else t.grad.detach().clone()
