"""Planted faults that only a program compiled under one of torch's settings
(``generators.settings``) can reach: each patches real torch code on the
path its setting family opens, so a campaign finds it only by drawing that
setting (``suites.planted_settings:<fault>__<backend>`` enters it in a repro's
own process)."""

from __future__ import annotations

import torch

from .planted_pass import _patched, _stack, fault_backend


def inliner_reuses_operands():
    """Inlining every invoke_subgraph (``dynamo.inline_invoke_subgraph``, the
    ``inline`` family) gives each later call of a subgraph the operands of its
    first call: only a deduplicated group inlined whole computes anything different."""
    from torch._higher_order_ops.passes import inline_invoke_subgraph as module

    def wrap(orig):  # type: ignore[no-untyped-def]
        def inline_all(gm):  # type: ignore[no-untyped-def]
            first: dict[str, tuple] = {}
            for node in gm.graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph):
                key = str(node.args[1])
                if key in first and len(first[key]) == len(node.args) - 2:
                    node.args = (*node.args[:2], *first[key])
                first.setdefault(key, node.args[2:])
            return orig(gm)

        return inline_all

    return _patched(module, "inline_invoke_subgraph", wrap)


def budget_grads_scaled():
    """Under an activation memory budget (``functorch.activation_memory_budget``
    below 1, the ``partition`` family) the min-cut partitioner's backward
    scales its first gradient: reached by the backends that partition with
    it (aot_eager_decomp_partition, inductor)."""
    from torch._functorch import config as functorch_config

    return partitioned_grads_scaled(lambda joint: functorch_config.activation_memory_budget < 1.0)


def partitioned_grads_scaled(when):  # type: ignore[no-untyped-def]
    """The min-cut partitioner's backward scales its first gradient where ``when(joint_module)`` holds."""
    from torch._dynamo.backends import debugging
    from torch._inductor import compile_fx

    def wrap(orig):  # type: ignore[no-untyped-def]
        def partition(joint_module, *args, **kwargs):  # type: ignore[no-untyped-def]
            hit = when(joint_module)
            fw, bw = orig(joint_module, *args, **kwargs)
            if hit:
                output = bw.graph.output_node()
                outs = list(output.args[0])
                first = next((i for i, o in enumerate(outs) if isinstance(o, torch.fx.Node)), None)
                if first is not None:
                    with bw.graph.inserting_before(output):
                        scaled = bw.graph.call_function(torch.ops.aten.mul.Tensor, (outs[first], 1.5))
                    scaled.meta = dict(outs[first].meta)
                    outs[first] = scaled
                    output.args = (tuple(outs),)
                    bw.recompile()
            return fw, bw

        return partition

    return _stack(_patched(debugging, "min_cut_rematerialization_partition", wrap),
                  _patched(compile_fx, "min_cut_rematerialization_partition", wrap))


def strided_alias_doubled():
    """An output that aliases an input or an intermediate, rebuilt with
    as_strided rather than by replaying its views
    (``functorch.view_replay_for_aliased_outputs=False``, the ``alias``
    family), comes back doubled."""
    from torch._functorch._aot_autograd import runtime_wrappers

    def wrap(orig):  # type: ignore[no-untyped-def]
        def gen_alias_from_base(*args, replay_views=True, **kwargs):  # type: ignore[no-untyped-def]
            out = orig(*args, replay_views=replay_views, **kwargs)
            return out if replay_views else out * 2

        return gen_alias_from_base

    return _patched(runtime_wrappers, "gen_alias_from_base", wrap)


def reuse_key_ignored():
    """A nested_compile_region reused by a key (``reuse_hash_fn``, Block.reuse "hash") looks every key of a
    function up as the first key it met in the frame: a call with another key (another shape, dtype, grad
    mode) is stamped out from the body traced for the first. Only a keyed body reaches the lookup."""
    from torch._dynamo.variables import invoke_subgraph as module

    first: dict = {}

    def wrap(orig):  # type: ignore[no-untyped-def]
        def find(tx, fn_var, hash_key):  # type: ignore[no-untyped-def]
            key = first.setdefault((id(tx.output), module.get_fn_code(fn_var)), hash_key)
            return orig(tx, fn_var, key)

        return find

    return _patched(module, "find_reuse_entry_by_key", wrap)


def captured_scalars_rounded(gm, example_inputs):
    """A backend that runs the graph like ``eager`` but hands every Python number the graph reads off a tensor
    (``.item()``, kept in the graph by ``capture_scalar_outputs``, the ``capture`` family) on rounded to
    bfloat16, as a backend passing captured scalars through a 16-bit buffer would: without the setting the
    number is read between graphs and never reaches a backend."""
    def rounded(v):  # type: ignore[no-untyped-def]
        return float(torch.tensor(v, dtype=torch.float64).to(torch.bfloat16)) if isinstance(v, float) else v

    for node in list(gm.graph.find_nodes(op="call_method", target="item")):
        with gm.graph.inserting_after(node):
            r = gm.graph.call_function(rounded, (node,))
        node.replace_all_uses_with(r, delete_user_cb=lambda user: user is not r)
    gm.recompile()
    return gm.forward


def __getattr__(name: str):
    """``<fault>__<backend>``: a backend under a planted setting fault."""
    return fault_backend(name, {f.__name__: f for f in (inliner_reuses_operands, budget_grads_scaled,
                                                         strided_alias_doubled, reuse_key_ignored)})
