"""Backends of other kinds than torch's: real ``torch.compile`` backends that
run inference only, compute in bfloat16, reject ops they do not know, or
compile nothing; each honest or with one planted fault. Named as
``suites.planted_backends:NAME``: what the capability probe
(harness.backend_capabilities) must find out, and what the oracles must still
catch on them."""

from __future__ import annotations

import torch


def _floating(t):
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _inference(transform=None):
    """Runs the graph with autograd off, as an inference engine does: the
    outputs carry no autograd graph."""
    def backend(gm: torch.fx.GraphModule, example_inputs):
        def run(*args):
            with torch.no_grad():
                outs = list(gm(*args))
            if transform is not None and outs and _floating(outs[-1]):
                outs[-1] = transform(outs[-1])
            return outs

        return run

    return backend


def _bump_one(t: torch.Tensor) -> torch.Tensor:
    bump = torch.zeros_like(t)
    bump.view(-1)[0] = 1e-3 * (1 + t.view(-1)[0].abs())
    return t + bump


inference_only = _inference()
# inference only, and one output element off by a relative 1e-3
inference_only_wrong = _inference(_bump_one)


def _bfloat16(scale_last: float = 1.0):
    """Computes the graph in bfloat16 (floating inputs rounded, outputs cast
    back), as a CPU plugin with a bf16 inference hint does."""
    def backend(gm: torch.fx.GraphModule, example_inputs):
        def run(*args):
            low = [a.detach().to(torch.bfloat16) if _floating(a) and a.dtype in (torch.float32, torch.float64) else a
                   for a in args]
            with torch.no_grad():
                outs = list(gm(*low))
            given = next((a.dtype for a in args if _floating(a)), torch.float32)
            back = [o.to(given) if _floating(o) and o.dtype == torch.bfloat16 else o for o in outs]
            if scale_last != 1.0 and back and _floating(back[-1]):
                back[-1] = back[-1] * scale_last
            return back

        return run

    return backend


bfloat16_inference = _bfloat16()
# bfloat16, and the last output 5% too large: beyond bfloat16's rounding
bfloat16_inference_wrong = _bfloat16(1.05)


def rejects_gelu(gm: torch.fx.GraphModule, example_inputs):
    """Rejects at compile time what it does not know (gelu, custom ops), else
    runs the graph as aot_eager does."""
    nodes = [n for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes]  # subgraphs too
    for node in nodes:
        name = getattr(node.target, "__name__", str(node.target))
        if node.op == "call_function" and ("gelu" in name or "dedup_harness" in str(node.target)):
            raise NotImplementedError(f"operator {name} is not supported by this backend")
    return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)


def compiles_nothing(gm: torch.fx.GraphModule, example_inputs):
    """A backend that fails on every graph."""
    raise RuntimeError("this backend failed to initialize its device")


def unseeded_random(gm: torch.fx.GraphModule, example_inputs):
    """Right values, but random ops drawn from a generator of its own (as a
    runtime with its own RNG does): nothing drawn compares with eager."""
    def run(*args):
        with torch.random.fork_rng():
            torch.manual_seed(1234)
            return gm(*args)

    return run


def no_float64(gm: torch.fx.GraphModule, example_inputs):
    """A runtime without float64 (as many accelerators' are): float64 inputs
    are computed and handed back in float32. Honest about every other dtype."""
    def run(*args):
        narrowed = [a.float() if isinstance(a, torch.Tensor) and a.dtype == torch.float64 else a for a in args]
        return gm(*narrowed)

    return run
