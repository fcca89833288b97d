"""How each call door (``generators.doors``) calls a model: torch only, so a
door repro inlines this module's source as it is (``reports.repro``) and
calls the program exactly as the campaign did.

``door_through(door, model, inputs, compile_fn)`` gives the callable, the module
whose buffers and parameters are the run's state, the inputs to call it
with, and the names of inputs it added; ``compile_fn`` None calls eagerly.
A function transform is compiled around (``torch.compile(torch.func.grad(f))``):
a transform of a compiled function called from eager is unsupported by
design (pytorch/pytorch#128711).
"""

import functools

import torch
from torch.utils._pytree import tree_flatten


def _door_floats(out):
    return [x for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor) and x.is_floating_point()]


def _door_weights(x, i):
    """Fixed, uneven cotangents, computed inside the traced function (a
    torch.Generator there is an opaque object Dynamo refuses)."""
    w = torch.arange(x.numel(), dtype=torch.float32, device=x.device).mul(0.7).add(i).sin()
    return w.reshape(x.shape).to(x.dtype)


def _door_scalar(out, like):
    total = like.sum() * 0
    for i, x in enumerate(_door_floats(out)):
        total = total + (x * _door_weights(x, i)).sum()
    return total


def _door_flat(out, like):
    parts = _door_floats(out)
    if not parts:
        return like.reshape(-1) * 0
    dtype = functools.reduce(torch.promote_types, [p.dtype for p in parts])
    return torch.cat([p.reshape(-1).to(dtype) for p in parts])


def _door_batched(t):
    if not isinstance(t, torch.Tensor):
        return t
    b = torch.stack([t.detach(), t.detach() * -0.5 + 0.25]) if t.is_floating_point() else torch.stack([t, t])
    return b.requires_grad_(t.requires_grad)


def _door_grad(fn, owner, inputs):
    return (lambda x, *rest: torch.func.grad(lambda x0: _door_scalar(fn(x0, *rest), x0))(x)), owner, inputs, []


def _door_vjp(fn, owner, inputs):
    def call(x, *rest):
        out, pull = torch.func.vjp(lambda x0: tuple(_door_floats(fn(x0, *rest))), x)
        return out, pull(tuple(_door_weights(o, i) for i, o in enumerate(out)))

    return call, owner, inputs, []


def _door_jacrev(fn, owner, inputs):
    return (lambda x, *rest: torch.func.jacrev(lambda x0: _door_flat(fn(x0, *rest), x0))(x)), owner, inputs, []


def _door_vmap(fn, owner, inputs):
    return torch.func.vmap(fn), owner, [_door_batched(t) for t in inputs], []


def _door_functional_call(fn, owner, inputs):
    """The module called with copies of its parameters, passed as extra inputs."""
    k, mine = len(inputs), list(owner.named_parameters())
    copies = [p.detach().clone().requires_grad_(p.requires_grad) for _, p in mine]
    names = [n for n, _ in mine]
    return (lambda *a: torch.func.functional_call(owner, dict(zip(names, a[k:])), tuple(a[:k]))), owner, \
        [*inputs, *copies], [f"param:{n}" for n in names]


DOOR_TRANSFORMS = {
    "transform:grad": _door_grad,
    "transform:vjp": _door_vjp,
    "transform:jacrev": _door_jacrev,
    "transform:vmap": _door_vmap,
    "transform:functional_call": _door_functional_call,
}


def _door_export(door, model, inputs, compile_fn):
    ep = torch.export.export(model, tuple(inputs), strict=door == "export:strict")
    if door == "export:unflatten":
        m = torch.export.unflatten(ep)
        return m, m, ep
    m = ep.module()
    return (compile_fn(m) if door == "export:compile" else m), m, ep


def door_through(door, model, inputs, compile_fn=None, exported=None):
    """``exported``, a list, receives the ExportedProgram of an export door."""
    if door in DOOR_TRANSFORMS:
        fn, owner, inputs, extra = DOOR_TRANSFORMS[door](model, model, inputs)
        return (compile_fn(fn) if compile_fn is not None else fn), owner, inputs, extra
    if door.startswith("export:") and compile_fn is not None:
        fn, owner, ep = _door_export(door, model, inputs, compile_fn)
        if exported is not None:
            exported.append(ep)
        return fn, owner, inputs, []
    return (compile_fn(model) if compile_fn is not None else model), model, inputs, []


def door_mark(door, inputs):
    """mark_dynamic / maybe_mark_dynamic on the batch dimension of every input that has it."""
    fn = {"dynamic:mark": "mark_dynamic", "dynamic:maybe_mark": "maybe_mark_dynamic"}.get(door)
    if fn is None or not inputs or not isinstance(inputs[0], torch.Tensor) or not inputs[0].dim():
        return
    batch = inputs[0].shape[0]
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == batch and batch >= 2:
            getattr(torch._dynamo, fn)(t, 0)


# Dynamo settings a door adds to the run's, and compile options it sets.
DOOR_CONFIG = {
    "dynamic:unbacked": {"dynamo.capture_scalar_outputs": True, "dynamo.capture_dynamic_output_shape_ops": True},
}
DOOR_COMPILE = {
    "dynamic:dynamic": {"dynamic": True},
    "dynamic:unbacked": {"dynamic": True},
}
