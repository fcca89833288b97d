"""Backends planted to break the promises CUDA graphs make, runnable on CPU.

Each is a real AOTAutograd backend (the structure of torch's own
``cudagraphs`` backend: forward and backward graphs wrapped by a replayer)
whose replayer breaks one promise, so the CUDA-graph oracle's replay and
stale-output logic is tested without a GPU. Named as
``suites.planted_cudagraphs:NAME``.
"""

from __future__ import annotations

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.backends.debugging import boxed_nop
from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter


def _alias(buf: torch.Tensor) -> torch.Tensor:
    """A new tensor over ``buf``'s memory, as CUDA graph trees hand out outputs."""
    return torch.empty(0, dtype=buf.dtype, device=buf.device).set_(
        buf.untyped_storage(), buf.storage_offset(), buf.size(), buf.stride())


def _replayer(wrap):
    """An AOTAutograd backend whose forward and backward graphs run through
    ``wrap(run) -> run'`` (boxed calling convention: a list of arguments)."""

    def compiler(gm: torch.fx.GraphModule, example_inputs):
        out = wrap(boxed_nop(gm, example_inputs))
        out._boxed_call = True
        return out

    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler, inference_compiler=compiler)


def _static_buffers(run):
    """Every call writes its results into the buffers of the first call and
    returns them: memory reused like a replayed graph's, with no error when an
    earlier result is read after being overwritten."""
    buffers: dict[int, torch.Tensor] = {}

    def replay(args):
        outs = run(args)
        result = []
        for i, o in enumerate(outs):
            if not isinstance(o, torch.Tensor):
                result.append(o)
                continue
            buf = buffers.get(i)
            if buf is None or buf.shape != o.shape or buf.dtype != o.dtype:
                buf = buffers[i] = torch.empty_like(o, memory_format=torch.contiguous_format)
            buf.copy_(o)
            result.append(_alias(buf))
        return result

    return replay


def _frozen_after_recording(run):
    """Calls 0 and 1 (warm-up and recording) compute; later calls return the
    recorded results again, as if fresh inputs were never copied into place."""
    seen: list = []

    def replay(args):
        if len(seen) < 2:
            outs = run(args)
            seen.append([o.clone() if isinstance(o, torch.Tensor) else o for o in outs])
            return outs
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in seen[-1]]

    return replay


def _skipping(run):
    log_cudagraph_skip_and_bump_counter("skipping cudagraphs due to planted reason")
    return run


# Stale outputs: call i's results silently change when call i+1 runs.
reused_buffers = _replayer(_static_buffers)
# Replays that ignore their inputs: every replay returns the recorded values.
frozen_replay = _replayer(_frozen_after_recording)
# Correct results, and a skip logged the way torch logs one.
planted_skip = _replayer(_skipping)
