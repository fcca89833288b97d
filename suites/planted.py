"""Backends with planted faults: real torch.compile backends that each break
one promise, to prove the oracles fire. Named as ``suites.planted:NAME``."""

from __future__ import annotations

import operator

import torch
import torch.utils._python_dispatch


def _wrap(transform):
    def backend(gm: torch.fx.GraphModule, example_inputs):
        def run(*args):
            outs = list(gm(*args))
            outs[-1] = transform(outs[-1])
            return outs

        return run

    return backend


def _bump_one(t: torch.Tensor) -> torch.Tensor:
    bump = torch.zeros_like(t)
    bump.view(-1)[0] = 1e-3
    return t + bump


# One output element off by 1e-3: beyond float32 noise, far below "obviously broken".
perturb_one_element = _wrap(_bump_one)
# The right values in the wrong dtype.
wrong_dtype = _wrap(lambda t: t.double())
# The right values, cut from the autograd graph: gradients silently vanish.
drop_gradient = _wrap(lambda t: t.detach())
not_a_backend = 42


def _wrap_all(transform):
    """Like ``_wrap``, but ``transform`` applies to every floating output."""
    def backend(gm: torch.fx.GraphModule, example_inputs):
        def run(*args):
            return [transform(t) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                    for t in gm(*args)]

        return run

    return backend


# -0.0 becomes +0.0, nothing else changes: only the signed-zero rule sees it.
zero_sign_lost = _wrap_all(lambda t: t + 0.0)
# NaN becomes 0.0, infinities kept: only the NaN rule sees it.
nan_zeroed = _wrap_all(lambda t: torch.nan_to_num(t, nan=0.0, posinf=float("inf"), neginf=float("-inf")))


def hides_input_writes(gm: torch.fx.GraphModule, example_inputs):
    """AOTAutograd keeping input writes in the forward graph (as inductor does), run eagerly with every
    argument's version counter preserved and ``torch.autograd.graph.increment_version`` a no-op at compile
    time: the values are right, but a write the compiled forward made to an input is hidden from autograd, as
    a kernel that writes in place and forgets ``increment_version`` hides it."""
    import contextlib
    from unittest import mock

    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def forward(fw: torch.fx.GraphModule, _):
        def run(args):
            with contextlib.ExitStack() as stack:
                for t in args:
                    if isinstance(t, torch.Tensor) and not t.is_inference():
                        stack.enter_context(torch.autograd._unsafe_preserve_version_counter(t))
                return fw(*args)

        run._boxed_call = True
        return run

    with mock.patch.object(torch.autograd.graph, "increment_version", lambda t: None):
        return aot_autograd(fw_compiler=forward, bw_compiler=lambda bw, _: make_boxed_func(bw.forward),
                            keep_inference_input_mutations=True)(gm, example_inputs)


def corrupt_every_third_invoke_subgraph(gm: torch.fx.GraphModule, example_inputs):
    """Adds 1.0 to the first result of the 3rd, 6th, ... invoke_subgraph call
    of each graph, then runs the graph like the ``eager`` backend: a bug only
    deduplicated programs with at least three region calls can show."""
    calls = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph]
    for node in calls[2::3]:
        for user in list(node.users):
            if user.target is operator.getitem and user.args[1] == 0:
                with gm.graph.inserting_after(user):
                    bad = gm.graph.call_function(torch.add, (user, 1.0))
                user.replace_all_uses_with(bad, delete_user_cb=lambda n: n is not bad)
    gm.recompile()
    return gm.forward


class _PassThrough(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def leak_dispatch_mode(gm: torch.fx.GraphModule, example_inputs):
    """Compiles correctly but leaves a dispatch mode pushed, as a compile that
    fails half-way can: every later program in the process runs under it."""
    _PassThrough().__enter__()
    return gm.forward


def abort_or_hang(gm: torch.fx.GraphModule, example_inputs):
    """A backend that takes its process down on some graphs: os.abort() on a
    graph with a subgraph call and an even node count, an endless sleep on a
    graph without one and a node count divisible by 4 (above 4); eager
    otherwise. The campaign's
    workers must survive both and report them."""
    import os
    import time

    nodes = len(gm.graph.nodes)
    subgraphs = any(n.target is torch.ops.higher_order.invoke_subgraph for n in gm.graph.nodes)
    if nodes % 2 == 0 and subgraphs:
        os.abort()
    if nodes % 4 == 0 and nodes > 4 and not subgraphs:
        time.sleep(3600)
    return gm.forward


# It says what it can do, so a campaign on it starts without a probe (whose graph it would hang on):
# how a probe that hangs or aborts is survived is suites/test_backend_capabilities.py's.
abort_or_hang.dedup_harness_capabilities = {}


def hangs(gm: torch.fx.GraphModule, example_inputs):
    """A backend that never returns: its probe must time out, not the campaign."""
    import time

    time.sleep(3600)


def aborts(gm: torch.fx.GraphModule, example_inputs):
    """A backend that takes its process down on every graph: its probe's child dies, not the campaign."""
    import os

    os.abort()



def abort_on_subgraph_calls(gm: torch.fx.GraphModule, example_inputs):
    """A backend that aborts its process on any graph with a subgraph call."""
    import os

    if any(n.target is torch.ops.higher_order.invoke_subgraph for n in gm.graph.nodes):
        os.abort()
    return gm.forward


def raises_on_seven(gm: torch.fx.GraphModule, example_inputs):
    """A backend that raises on graphs of a multiple of 7 nodes, eager
    otherwise: one root cause met by a share of programs, cheap to meet
    (the worker lives on), as shards of one campaign meet it."""
    if len(gm.graph.nodes) % 7 == 0:
        raise RuntimeError("planted: cannot compile a graph of a multiple of 7 nodes")
    return gm.forward


raises_on_seven.dedup_harness_capabilities = {}  # the shards start without a probe


def known_crash_under_dedup(gm: torch.fx.GraphModule, example_inputs):
    """Under graph deduplication, raises the crash a recorded issue names
    (KI-066's, whose trigger is the pass); without it, runs with one output
    element off: a fault that a known crash on every deduplicated run hides,
    until the run is judged again without the crash's trigger."""
    if torch._dynamo.config.use_graph_deduplication:
        raise RuntimeError("s0 (<class 'torch.SymInt'>, 2)is not tracked with proxy for "
                           "<torch.fx.experimental.proxy_tensor.PythonKeyTracer object at 0x1>")
    return _wrap(_bump_one)(gm, example_inputs)


known_crash_under_dedup.dedup_harness_capabilities = {}  # no probe: the probe runs without the pass
