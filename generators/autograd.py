"""The autograd graph through regions (``Options.autograd``): hooks, saved
tensors, gradient edges and higher-order gradients, read from
torch/autograd/graph.py, torch/nn/modules/module.py (``_call_impl``'s hook
order) and how Dynamo traces a hook (torch/_dynamo/variables/tensor.py: a
hook on an intermediate is traced into the graph as ``register_hook_op``; a
hook with a side effect inside a ``nested_compile_region`` body is refused).

A feature is one entry: its family, where it sits in the program (``place``)
and the lines it adds there. Places:

- ``body``: lines in the layer block's body, at its primary input, its first
  value or its result (``at``); ``{t}`` the value hooked, ``{m}`` the first value;
- ``init``: lines at the end of ``Program.__init__`` (module and parameter hooks);
- ``around``: a context manager the forward and the backward run under;
- ``drive``: how the gradients are asked for (replaces the plain backward);
- ``forward``: a context manager the whole forward's body runs under, inside the compiled frame.

Every hook that observes writes ``(label, value)`` to the program's ``AUTOGRAD_TRACE``
(``harness.execute`` reads it after each run): the autograd-trace oracle
compares eager's with the compiled run's, as torch promises (``PROMISES``).
A hook that changes a gradient shows in the gradients themselves. Nothing
here imports torch.

Left out, with the reason: ``allow_mutation_on_saved_tensors`` (a dispatch
mode: Dynamo compiles nothing under it, so nothing of the compiler is
tested); the global module hooks added, removed or replaced between compiled calls
(``register_module_forward_hook``: documented for debugging only, and their
dicts are guarded by type alone on this torch, so one registered after a
compile is never seen, as upstream notes in pytorch/pytorch#197135; they are
drawn registered around each whole run, ``module.global_*``); a door (each door's contract says what reaches
autograd through it). Module hooks added or removed between compiled calls
are changes of their own (``generators.variants``' "hook" family), made only
under the setting that has Dynamo guard on them (``guard.module_hooks``:
without it torch documents that it does not notice, ``skip_nnmodule_hook_guards``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FAMILIES = ("tensor", "node", "module", "saved", "grad", "partition")
PLACES = ("body", "init", "around", "drive", "forward")
ATS = ("input", "mid", "output")


@dataclass(frozen=True)
class Feature:
    name: str
    family: str  # FAMILIES
    place: str  # PLACES
    lines: tuple[str, ...]  # body/init/drive lines; around: one context-manager expression
    changes: str  # what it exercises, one line
    at: str = ""  # body: which value it hooks (ATS)
    pure: bool = False  # no side effect: may sit in a nested_compile_region body
    module: bool = False  # needs module instances (a module block or module sub-block)
    weights: bool = False  # needs parameters
    writes: bool = False  # writes the inputs that need no gradient between the forward and the backward
    # How eager's values relate to the same program's without the feature, as torch promises (VALUES); "": they
    # change (a hook that returns a new gradient), not judged
    values: str = ""
    # not where a block is a nested_compile_region body: what it annotates is not inherited there
    # (pytorch/pytorch#170624: a nested region is its own root for annotations)
    regionless: bool = False
    # Documented refusals of the compiled path (message patterns): a compiled failure matching one is
    # "unsupported", counted apart, never a finding (e.g. AOTAutograd's "does not support double backward").
    refusals: tuple[str, ...] = ()
    # Gradients it asks for come back through the leaves' __torch_function__ (torch.autograd.grad is overridable):
    # of a tensor subclass where backward() leaves plain tensors in .grad; same values, another class
    grads_wrapped: bool = False
    # Its hooks route a module's inputs through BackwardHookFunction (full backward hooks): an input no output
    # reaches gets a gradient of zeros where the program without them leaves None; same values otherwise
    zero_grads: bool = False


FEATURES_LIST = (
    # --- tensor hooks: observe, change the gradient, on the input, an intermediate, the result, parameters
    Feature("tensor.observe", "tensor", "body", ("_observe({t}, 'tensor.mid')",),
            "Tensor.register_hook on the block's first value, observing its gradient", at="mid", values="same"),
    Feature("tensor.input", "tensor", "body", ("_observe({t}, 'tensor.input')",),
            "Tensor.register_hook on the block's primary input inside the body", at="input", values="same"),
    Feature("tensor.scale", "tensor", "body", ("_scale({t})",),
            "a hook returning a new gradient (twice the one it gets) on the first value", at="mid", pure=True),
    Feature("tensor.output", "tensor", "body", ("_scale({t})", "_observe({t}, 'tensor.output')"),
            "two hooks on the result, run in the order registered: the second sees what the first returned",
            at="output"),
    Feature("tensor.post_accumulate", "tensor", "init", ("_post_accumulate(self)",),
            "register_post_accumulate_grad_hook on every other parameter", weights=True, values="same"),
    # --- autograd node hooks
    Feature("node.hooks", "node", "body", ("_node_hooks({t}, 'node')",),
            "grad_fn.register_prehook and register_hook on the first value's node (the pre-hook first)", at="mid", values="same"),
    Feature("node.multi_all", "node", "body", ("_multi({m}, {t}, 'multi.all', 'all')",),
            "register_multi_grad_hook(mode='all') over the first value and the result", at="output", values="same"),
    Feature("node.multi_any", "node", "body", ("_multi({m}, {t}, 'multi.any', 'any')",),
            "register_multi_grad_hook(mode='any'): called once, with whichever gradient comes first", at="output", values="same"),
    # --- module hooks, on every other instance of the program's own module classes
    Feature("module.forward_pre", "module", "init", ("_module_hooks(self, 'forward_pre')",),
            "a forward pre-hook observing the first argument", module=True, values="same"),
    Feature("module.forward", "module", "init", ("_module_hooks(self, 'forward')",),
            "a forward hook observing the output", module=True, values="same"),
    Feature("module.forward_kwargs", "module", "init", ("_module_hooks(self, 'forward_kwargs')",),
            "a forward hook with_kwargs=True, always_call=True", module=True, values="same"),
    Feature("module.forward_replace", "module", "init", ("_module_hooks(self, 'forward_replace')",),
            "a forward hook returning a new output (twice the float output)", module=True),
    Feature("module.backward", "module", "init", ("_module_hooks(self, 'backward')",),
            "a full backward pre-hook and a full backward hook (the pre-hook first)", module=True, values="same",
            zero_grads=True),
    Feature("module.backward_replace", "module", "init", ("_module_hooks(self, 'backward_replace')",),
            "a full backward pre-hook returning a new grad_output (twice the one it gets)", module=True),
    # --- the global module hooks (torch.nn.modules.module.register_module_*): every module call in the process,
    # registered around each run and removed after it (registered between compiled calls, one is never seen:
    # their dicts are guarded by type alone, pytorch/pytorch#197135)
    Feature("module.global_forward", "module", "around", ("_global_hooks('forward')",),
            "a global forward pre-hook and forward hook observing every call of the program's own modules",
            module=True, values="same"),
    Feature("module.global_backward", "module", "around", ("_global_hooks('backward')",),
            "a global full backward pre-hook and backward hook observing every call of the program's own modules "
            "(the pre-hook first)", module=True, values="same", zero_grads=True),
    # --- saved tensors
    Feature("saved.pair", "saved", "around", ("torch.autograd.graph.saved_tensors_hooks(_pack, _unpack)",),
            "saved_tensors_hooks packing each saved tensor in a tagged pair, counting packs and unpacks", values="same"),
    Feature("saved.negate", "saved", "around", ("torch.autograd.graph.saved_tensors_hooks(_pack_neg, _unpack_neg)",),
            "saved_tensors_hooks storing each float saved tensor negated, negating it back (exact): a hook applied "
            "on one side only changes the gradients", values="same"),
    Feature("saved.float64", "saved", "around", ("torch.autograd.graph.saved_tensors_hooks(_pack64, _unpack64)",),
            "saved_tensors_hooks moving each float saved tensor to float64 and back (lossless)", values="same"),
    Feature("saved.cpu", "saved", "around", ("torch.autograd.graph.save_on_cpu(pin_memory=False)",),
            "save_on_cpu", values="same"),
    Feature("saved.disabled", "saved", "around",
            ("torch.autograd.graph.disable_saved_tensors_hooks('this program runs with saved tensors hooks off')",),
            "disable_saved_tensors_hooks: registering saved tensors hooks raises", values="same"),
    Feature("saved.modified", "saved", "drive", (),
            "the inputs written between the forward and the backward: eager raises where a saved one was "
            "written (recorded as 'error.inplace'); compiled code must raise alike", writes=True),
    # --- gradient edges and partial gradients (the drive: how the gradients are asked for)
    Feature("grad.subset", "grad", "drive",
            ("chosen = leaves[::2]", "_assign(chosen, torch.autograd.grad(outs, chosen, cots, allow_unused=True))"),
            "torch.autograd.grad for every other leaf", values="subset", grads_wrapped=True),
    Feature("grad.inputs", "grad", "drive", ("torch.autograd.backward(outs, cots, inputs=leaves[::2])",),
            "backward(inputs=...) for every other leaf", values="subset"),
    Feature("grad.edge", "grad", "drive",
            ("edges = [torch.autograd.graph.get_gradient_edge(t) for t in leaves]",
             "_assign(leaves, torch.autograd.grad(outs, edges, cots, allow_unused=True))"),
            "torch.autograd.grad by get_gradient_edge of each leaf", values="same", grads_wrapped=True),
    Feature("grad.retain", "grad", "drive",
            ("torch.autograd.backward(outs, cots, retain_graph=True)", "torch.autograd.backward(outs, cots)"),
            "backward with retain_graph=True, then again: the gradients accumulate twice",
            refusals=(r"compiled with non-empty donated buffers",), values="twice"),
    Feature("grad.double", "grad", "drive",
            ("first = torch.autograd.grad(outs, leaves, cots, create_graph=True, allow_unused=True)",
             "_record_all('grad.first', first)",
             "_second(first)"),
            "create_graph=True, then the gradient of the first gradients' squares: a double backward",
            refusals=(r"does not currently support double backward",
                      r"compiled with non-empty donated buffers")),
    # --- the partitioner's choice, per region (torch/autograd/graph.py: region_activation_memory_budget, an
    # fx_traceback annotation the min-cut partitioner reads back; it must cover every forward op of a graph,
    # HOP bodies included, and raises outside a compile, so eager runs the forward without it)
    Feature("partition.recompute", "partition", "forward", ("_region_budget(0.0)",),
            "region_activation_memory_budget(0.0) around the whole forward: the partitioner recomputes as "
            "activation checkpointing would", regionless=True),
    Feature("partition.budget", "partition", "forward", ("_region_budget(0.4)",),
            "region_activation_memory_budget(0.4) around the whole forward: a knapsack keeps 40% of the "
            "activations", regionless=True),
)
FEATURES: dict[str, Feature] = {f.name: f for f in FEATURES_LIST}
# Feature.values: what torch promises of a program's eager values with the feature against the same program's
# without it. "same": outputs, state and gradients alike (a hook that only observes, a lossless pack/unpack
# pair, a gradient asked for by its edge); "subset": the gradients of the leaves the drive asks for (every
# other one) alike, the others none; "twice": every gradient doubled (backward run twice), the rest alike.
VALUES = ("same", "subset", "twice")


def grads_wrapped(names: tuple[str, ...]) -> bool:
    """Whether the gradients of a program with the features ``names`` come back of a leaf's tensor subclass
    where the same program without them leaves plain tensors (Feature.grads_wrapped)."""
    return any(FEATURES[n].grads_wrapped for n in names)


def zero_grads(names: tuple[str, ...]) -> bool:
    """Whether a program with the features ``names`` may give zeros where without them a gradient is None
    (Feature.zero_grads)."""
    return any(FEATURES[n].zero_grads for n in names)


def plain_values(names: tuple[str, ...]) -> str:
    """How a program's eager values with the features ``names`` relate to its values without them (VALUES; ""
    where some feature changes them or none is drawn)."""
    kinds = {FEATURES[n].values for n in names}
    if not names or "" in kinds:
        return ""
    kinds.discard("same")
    return "same" if not kinds else kinds.pop() if len(kinds) == 1 else ""

# Module-level helpers the features' lines call: a program gets the ones its features' lines name, and
# the ones those name (``helpers``), with TRACE first.
TRACE = "AUTOGRAD_TRACE"  # names distinct enough that a model's own module never has them
TRACE_LINE = f"{TRACE} = []  # (label, value) of every hook call: harness.execute reads and clears it around each run"
HELPERS = '''\
def _record(label, value):
    AUTOGRAD_TRACE.append((label, value.detach().clone() if isinstance(value, torch.Tensor) else None))


def _record_all(label, values):
    for i, v in enumerate(values):
        _record(f"{label}[{i}]", v)


def _observe(t, label):
    if t.requires_grad:
        t.register_hook(lambda g: _record(label, g))
    return t


def _double(g):
    return g * 2


def _scale(t):
    if t.requires_grad:
        t.register_hook(_double)
    return t


def _node_hooks(t, label):
    if t.grad_fn is not None:
        t.grad_fn.register_prehook(lambda grad_outputs: _record(label + ".pre", grad_outputs[0]))
        t.grad_fn.register_hook(lambda grad_inputs, grad_outputs: _record(label + ".post", grad_outputs[0]))
    return t


def _multi(a, b, label, mode):
    ts = [t for t in (a, b) if isinstance(t, torch.Tensor) and t.requires_grad]
    if len(ts) == 2 and ts[0] is ts[1]:
        ts = ts[:1]
    if len(ts) == 2 and mode == "all":
        torch.autograd.graph.register_multi_grad_hook(ts, lambda grads: _record_all(label, grads))
    elif len(ts) == 2:
        torch.autograd.graph.register_multi_grad_hook(ts, lambda grad: _record(label, torch.ones(())), mode="any")
    return b


def _instances(root):
    """Every other instance of the program's own module classes, in module order."""
    own = [m for m in root.modules() if m is not root and type(m).__module__ == __name__]
    return own[::2]


def _module_hooks(root, kind):
    for i, m in enumerate(_instances(root)):
        label = f"module.{kind}[{i}]"
        if kind == "forward_pre":
            m.register_forward_pre_hook(lambda mod, args, label=label: _record(label, args[0] if args else None))
        elif kind == "forward":
            m.register_forward_hook(lambda mod, args, out, label=label: _record(label, out))
        elif kind == "forward_kwargs":
            m.register_forward_hook(lambda mod, args, kwargs, out, label=label: _record(label, out),
                                    with_kwargs=True, always_call=True)
        elif kind == "forward_replace":
            m.register_forward_hook(lambda mod, args, out: out * 2 if isinstance(out, torch.Tensor)
                                    and out.is_floating_point() else None)
        elif kind == "backward":
            m.register_full_backward_pre_hook(lambda mod, go, label=label: _record(label + ".pre", go[0]))
            m.register_full_backward_hook(lambda mod, gi, go, label=label: _record(label + ".post", go[0]))
        elif kind == "backward_replace":
            m.register_full_backward_pre_hook(lambda mod, go: tuple(None if g is None else g * 2 for g in go))


def _global_hooks(kind):
    import contextlib
    from torch.nn.modules import module as nn_module

    def own(mod):
        # the program's own blocks: not the compiled wrapper, not torch's containers, and not the Program itself,
        # whose call runs its hooks before the frame Dynamo compiles: a record there is state that frame's entry
        # guards on (the trace's length), which a check of the entry made between runs sees cleared
        return type(mod).__module__ == __name__ and type(mod).__name__ != "Program"

    def label(mod, part):
        return f"global.{kind}.{type(mod).__name__}{part}"

    # Registered once, then put back under the same handles around every run: Dynamo guards the global hook
    # dicts' keys and hooks, so hooks registered afresh for each run would recompile every call
    kept = _global_hooks.__dict__.setdefault("kept", {})
    if kind not in kept:
        if kind == "forward":
            hooks = [(nn_module.register_module_forward_pre_hook, lambda mod, args: _record(
                          label(mod, ".pre"), args[0] if args else None) if own(mod) else None),
                     (nn_module.register_module_forward_hook, lambda mod, args, out: _record(
                          label(mod, ".post"), out) if own(mod) else None)]
        else:
            hooks = [(nn_module.register_module_full_backward_pre_hook, lambda mod, go: _record(
                          label(mod, ".pre"), go[0]) if own(mod) else None),
                     (nn_module.register_module_full_backward_hook, lambda mod, gi, go: _record(
                          label(mod, ".post"), go[0]) if own(mod) else None)]
        handles = [(register(hook), hook) for register, hook in hooks]
        kept[kind] = [(handle.hooks_dict_ref(), handle.id, hook) for handle, hook in handles]
        for handle, _ in handles:
            handle.remove()

    @contextlib.contextmanager
    def registered():
        for hooks, key, hook in kept[kind]:
            hooks[key] = hook
        try:
            yield
        finally:
            for hooks, key, _ in kept[kind]:
                hooks.pop(key, None)

    return registered()


def _contexts(*managers):
    import contextlib

    @contextlib.contextmanager
    def entered():
        with contextlib.ExitStack() as stack:
            for manager in managers:
                stack.enter_context(manager)
            yield

    return entered()


def _post_accumulate(root):
    for i, p in enumerate(root.parameters()):
        if i % 2 == 0 and p.requires_grad:
            p.register_post_accumulate_grad_hook(lambda p, i=i: _record(f"tensor.post[{i}]", p.grad))


def _pack(t):
    _record("saved.pack", torch.ones(()))
    return ("packed", t)


def _unpack(packed):
    tag, t = packed
    assert tag == "packed", "unpacked what was never packed"
    _record("saved.unpack", torch.ones(()))
    return t


def _pack_neg(t):
    return ("negated", t.neg() if t.is_floating_point() else t)


def _unpack_neg(packed):
    tag, t = packed
    return t.neg() if t.is_floating_point() else t


def _pack64(t):
    return (t.dtype, t.to(torch.float64) if t.is_floating_point() else t)


def _unpack64(packed):
    dtype, t = packed
    return t.to(dtype)


def _assign(leaves, grads):
    for t, g in zip(leaves, grads):
        if g is not None:
            t.grad = g if t.grad is None else t.grad + g


def _second(first):
    loss = sum((g * g).sum() for g in first if g is not None and g.requires_grad)
    if isinstance(loss, torch.Tensor):
        loss.backward()


def _region_budget(budget):
    import contextlib
    region = getattr(torch.autograd.graph, "region_activation_memory_budget", None)  # a torch without it: none
    if region is None or not torch.compiler.is_compiling():
        return contextlib.nullcontext()  # eager has no partitioner, and the annotation raises there
    return region(budget)


def _write(inputs):
    for t in inputs:
        if not t.requires_grad and t.is_floating_point() and 0 not in t.stride():
            t.mul_(0.5)
'''

def _split(source: str) -> dict[str, str]:
    """HELPERS by function name."""
    out = {}
    for chunk in source.strip().split("\n\n\n"):
        out[chunk.split("(")[0].removeprefix("def ")] = chunk
    return out


def _names(name: str, text: str) -> bool:
    return re.search(rf"\b{name}\b", text) is not None


HELPER_DEFS = _split(HELPERS)
_CALLS = {name: {other for other in HELPER_DEFS if other != name and _names(other, src)}
          for name, src in HELPER_DEFS.items()}


def helpers(lines: list[str]) -> list[str]:
    """The definitions ``lines`` name, and those they name, in HELPERS' order, TRACE first."""
    wanted = {name for name in HELPER_DEFS if any(_names(name, line) for line in lines)}
    todo = list(wanted)
    while todo:
        for other in _CALLS[todo.pop()]:
            if other not in wanted:
                wanted.add(other)
                todo.append(other)
    return [TRACE_LINE, *(HELPER_DEFS[n] for n in HELPER_DEFS if n in wanted)]


DRIVE = "autograd_drive"  # the generated function harness.execute calls for the backward: drive(outs, cots, leaves, inputs)
CONTEXT = "autograd_context"  # the generated function returning the context the forward and backward run under
DEFAULT_DRIVE = ("torch.autograd.backward(outs, cots)",)
INPLACE = "modified by an inplace operation"  # what eager raises for a saved tensor written in place

# What torch promises about each record a trace holds, by label prefix, and the kind a broken
# promise gets (oracles.autograd_trace):
# "each": every call in eager is matched by one in the compiled run (count and value);
# "free": not compared (pack and unpack: what is saved is the partitioner's choice, and code no gradient needs
# is dropped; a hook applied on one side shows in the gradients, or as the tag check's error);
# "once": as many calls, values not compared (mode="any": whichever gradient comes first).
PROMISES = (
    ("saved.", "free", "pack"),
    ("multi.any", "once", "hook"),
    ("error.", "each", "error"),
    ("grad.", "each", "grad"),
    ("", "each", "hook"),
)
# Records torch orders: within one backward, every record of the second label comes after one of the first
# (a node's pre-hook before its hook, a module's full backward pre-hook before its backward hook).
ORDERED = ((".pre", ".post"),)


def promise(label: str) -> tuple[str, str]:
    """(promise, kind prefix) of a record's label."""
    return next((p, k) for prefix, p, k in PROMISES if label.startswith(prefix))


def fits(feature: Feature, region: bool, modules: bool, weights: bool, regions: bool = False) -> bool:
    """Whether ``feature`` may join a program whose layer block is a region body (``region``), that has
    instances of its own module classes (``modules``), parameters (``weights``), and any block that is a
    region body (``regions``)."""
    if feature.place == "body" and region and not feature.pure:
        return False  # a hook with a side effect in a region body is refused by design (UncapturedHigherOrderOp)
    if feature.regionless and (region or regions):
        return False
    return (modules or not feature.module) and (weights or not feature.weights)


def assign(key: str, share: float, fit: list[str]) -> str:
    """The feature a campaign gives the program ``key`` names (a program id), among ``fit`` (those that
    fit it): none for ``1 - share`` of keys; the same for every run of one seed and shard (a stable hash)."""
    import zlib

    h = zlib.crc32(key.encode())
    return fit[(h // 1000) % len(fit)] if fit and h % 1000 < share * 1000 else ""
