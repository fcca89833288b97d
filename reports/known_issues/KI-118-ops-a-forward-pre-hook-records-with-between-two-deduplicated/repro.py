"""Repro: KI-118: Ops a forward pre-hook records with between two deduplicated calls under no_grad run with grad enabled once every invoke_subgraph is inlined: the pass moves the grad-mode switch past them (KI-004's reordering, seen on the inlined graph)

Exit status 1: reproduced; 0: not reproduced; 3: fails, but differently; 2: the repro itself failed. Needs only torch."""
import os as _os
import sys as _sys
import traceback as _traceback


def _error_before_check(kind, value, tb):
    _traceback.print_exception(kind, value, tb)
    print("ERROR: the repro itself failed (exit 2), not the failure it checks for", flush=True)
    _sys.stderr.flush()
    _os._exit(2)


_sys.excepthook = _error_before_check
import torch
import torch.nn as nn
import torch.nn.functional as F


AUTOGRAD_TRACE = []  # (label, value) of every hook call: harness.execute reads and clears it around each run


def _record(label, value):
    AUTOGRAD_TRACE.append((label, value.detach().clone() if isinstance(value, torch.Tensor) else None))


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


class BlockMlp(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        v0 = x.masked_fill(x > 0.0, 0.0)
        return v0


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp_0 = BlockMlp()
        self.mlp_1 = BlockMlp()

    def forward(self, x):
        v0 = F.layer_norm(x, (1,))
        v1 = self.mlp_0(v0)
        v3 = self.mlp_1(v1)
        return v3


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        self.m0_0 = Block()
        _module_hooks(self, 'forward_pre')

    def forward(self, x):
        h = x
        with torch.no_grad():
            h = self.m0_0(h)
        return h


def make_inputs(device="cpu"):
    x = torch.randn((3, 1), dtype=torch.float32, device=device).requires_grad_(True)
    return [x]


# ---- how this repro compiles: the backend and the torch config of the run ----
import importlib
import os
import sys

import torch._dynamo

BACKEND = 'aot_eager'  # a torch backend name, or package.module:callable
TORCH_CONFIG = {'dynamo.inline_invoke_subgraph': True}


def backend():
    if ":" not in BACKEND:
        return BACKEND
    sys.path.append(os.getcwd())  # a plugin imports as the campaign imported it: run from the same folder
    module, _, name = BACKEND.partition(":")
    return getattr(importlib.import_module(module), name)


def configure(dedup):
    """Deduplication on or off, and the torch config the finding was made under."""
    import torch._functorch.config
    import torch._inductor.config

    torch._dynamo.config.use_graph_deduplication = dedup
    sections = {"dynamo": torch._dynamo.config, "inductor": torch._inductor.config, "functorch": torch._functorch.config}
    for key, value in TORCH_CONFIG.items():
        section, _, name = key.partition(".")
        setattr(sections[section], name, value)


# ---- driver: exits 1 when the pass groups regions that are not identical ----
import collections
import fnmatch
import math
import operator
import sys
import traceback
from typing import Any, Callable, Optional

from torch._dynamo import graph_deduplication, output_graph
from torch._dynamo.graph_region_tracker import GraphRegionTracker
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten

# The difference this repro checks for: a glob over "oracle:label" as the
# harness names it (None: any difference).
EXPECT = None
SEED = 3
COMPILE_KWARGS = {'fullgraph': False}
GROUPS = []  # each group's regions, described when the tracker returns them (the pass erases their nodes)
ENTRIES = {}  # id(OutputGraph) -> the state its frame started in
AFTER = []  # (root, graph, entry state) of each graph after the pass
ENTRY = None
REPLACED = {}  # subgraph call -> the traced states of the region it replaced
ALIASED = []  # (label, line) of regions replaced although their inputs or outputs share storage


def state():
    autocast = str(torch.get_autocast_dtype("cpu")) if torch.is_autocast_enabled("cpu") else None
    return {"grad": torch.is_grad_enabled(), "inference": torch.is_inference_mode_enabled(),
            "autocast_cpu": autocast, "default_dtype": str(torch.get_default_dtype())}


# ---- the harness's own description of a region and its differences (embedded) ----
NodeDesc = collections.namedtuple("NodeDesc", "name op target args value ambient")
IGNORED_AMBIENT = {'num_threads'}


def target_name(node: torch.fx.Node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    return getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)


def value_meta(value: Any) -> Optional[dict[str, Any]]:
    """What makes two tensors interchangeable as inputs of one subgraph."""
    if isinstance(value, torch.Tensor):
        return {
            "shape": [str(s) for s in value.shape],
            "dtype": str(value.dtype),
            "stride": [str(s) for s in value.stride()] if value.layout == torch.strided else None,
            "device": str(value.device),
            "requires_grad": bool(value.requires_grad),
            "layout": str(value.layout),
        }
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"symbol": str(value)}
    if isinstance(value, (tuple, list)):
        return {"sequence": [value_meta(v) for v in value]}
    return None if value is None else {"python": type(value).__name__}


def constant(value: Any) -> tuple[str, str]:
    """A constant argument by type and value (2, 2.0 and True differ)."""
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__qualname__, repr(value))


def _lists_as_tuples(arg: Any) -> Any:
    if isinstance(arg, (list, tuple)) and not isinstance(arg, torch.Size):
        return tuple(_lists_as_tuples(a) for a in arg)
    return arg


def describe_region(region: list, ambient_of: Callable[[Any], Optional[dict]]) -> list:
    """A region's nodes as ``NodeDesc`` (``ambient_of(node)``: the state it
    was traced under). Standalone and torch-only: region-identity repros
    embed its source (reports.repro), so they name differences as the
    oracle does."""
    index = {n: i for i, n in enumerate(region)}
    inputs: dict = {}
    out = []
    for node in region:
        args = []
        flat = [(f"args[{i}]", a) for i, a in enumerate(node.args)]
        flat += [(f"kwargs[{k}]", node.kwargs[k]) for k in sorted(node.kwargs)]
        for where, arg in flat:
            if node.target not in (operator.getitem, operator.setitem):
                # a torch op takes a list and a tuple of ints alike (int[]); only indexing tells them apart
                arg = _lists_as_tuples(arg)
            leaves, spec = tree_flatten(arg)
            if len(leaves) != 1 or leaves[0] is not arg:
                args.append((f"{where}:spec", ("const", "spec", str(spec))))
            for j, leaf in enumerate(leaves):
                key = where if len(leaves) == 1 and leaves[0] is arg else f"{where}[{j}]"
                if isinstance(leaf, torch.fx.Node):
                    if leaf in index:
                        args.append((key, ("node", index[leaf])))
                    else:
                        k = inputs.setdefault(leaf, len(inputs))
                        args.append((key, ("input", k, value_meta(leaf.meta.get("example_value")))))
                else:
                    args.append((key, ("const", *constant(leaf))))
        out.append(NodeDesc(node.name, node.op, target_name(node), args,
                            value_meta(node.meta.get("example_value")), ambient_of(node)))
    return out


def _first_difference(a: NodeDesc, b: NodeDesc) -> Optional[tuple[str, str]]:
    """(label, description) of the first way two corresponding nodes differ,
    causes before consequences."""
    if (a.op, a.target) != (b.op, b.target):
        return "target", f"op {a.op} {a.target} vs {b.op} {b.target}"
    keys_a, keys_b = [k for k, _ in a.args], [k for k, _ in b.args]
    if keys_a != keys_b:
        return "arguments", f"arguments {keys_a} vs {keys_b}"
    for (where, x), (_, y) in zip(a.args, b.args):
        found = _arg_difference(x, y)
        if found:
            return found[0], f"{where}: {found[1]}"
    # the state a node ran under before its result: a result's metadata
    # follows from the op, its arguments and that state (autocast makes
    # the dtype), so it is a cause of its own only when they are all alike
    if a.ambient is not None and b.ambient is not None:
        for field in a.ambient:
            if field not in IGNORED_AMBIENT and a.ambient[field] != b.ambient.get(field):
                return f"ambient:{field}", f"traced under {field}={a.ambient[field]!r} vs {b.ambient.get(field)!r}"
    found = _meta_difference(a.value, b.value)
    if found:
        return f"value:{found[0]}", f"result {found[1]}"
    return None


def _arg_difference(x: tuple, y: tuple) -> Optional[tuple[str, str]]:
    if x[0] != y[0]:
        return "arguments", f"{x[0]} vs {y[0]}"
    if x[0] == "node" and x[1] != y[1]:
        return "topology", f"the region's node {x[1]} vs node {y[1]}"
    if x[0] == "input":
        if x[1] != y[1]:
            return "topology", f"external input #{x[1]} vs #{y[1]} (inputs used in a different pattern)"
        found = _meta_difference(x[2], y[2])
        if found:
            return f"input:{found[0]}", f"external input {found[1]}"
    if x[0] == "const" and x[1:] != y[1:]:
        label = x[1] if x[1] == y[1] else "type"
        return f"constant:{label}", f"constant {x[1]} {x[2]} vs {y[1]} {y[2]}"
    return None


def _meta_difference(a: Any, b: Any) -> Optional[tuple[str, str]]:
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for field in sorted(a.keys() | b.keys()):
            if a.get(field) != b.get(field):
                return field, f"{field} {a.get(field)} vs {b.get(field)}"
    return "kind", f"{a} vs {b}"


def _pair_differences(ref: list, region: list) -> list[tuple[str, str, Any, Any]]:
    """(label, description, node of ``ref``, node of ``region``) of each
    node pair of two regions of one size that differs, causes only: a
    result that differs because an argument made in the region does is a
    consequence. Regions repros embed it (reports.repro)."""
    out, differing = [], set()
    for i, (a, b) in enumerate(zip(ref, region)):
        hit = _first_difference(a, b)
        if not hit:
            continue
        differing.add(i)
        if hit[0].startswith("value:") and any(x[0] == "node" and x[1] in differing for _, x in a.args):
            continue
        out.append((*hit, a, b))
    return out


def install():
    create_proxy, regions = output_graph.SubgraphTracer.create_proxy, GraphRegionTracker.get_identical_regions
    init, dedup = output_graph.OutputGraph.__init__, output_graph.apply_graph_deduplication
    replace = graph_deduplication._replace_region_with_subgraph

    def recording_create_proxy(self, *args, **kwargs):
        proxy = create_proxy(self, *args, **kwargs)
        proxy.node.meta["repro_state"] = state()
        return proxy

    def recording_regions(self, graph):
        groups = regions(self, graph)
        GROUPS.extend([describe_region(r, lambda n: n.meta.get("repro_state")) for r in g] for g in groups)
        return groups

    def recording_init(self, *args, **kwargs):
        ENTRIES[id(self)] = state()  # each frame's graph starts from the state at its entry
        init(self, *args, **kwargs)

    def recording_dedup(og):
        entry = ENTRIES.get(id(og), ENTRY)
        root = output_graph.FakeRootModule(og.nn_modules)
        # judged only where replaying the state nodes models the graph before the pass
        modelled = not misplaced(root, og.graph, entry)
        result = dedup(og)
        if modelled:  # the graph as the pass left it, judged even when a later step fails
            AFTER.append((output_graph.FakeRootModule(og.nn_modules), og.graph, entry))
        return result

    def recording_replace(graph, region, *args, **kwargs):
        calls = graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph)
        shared = aliasing(region)  # read before the pass erases the region's nodes
        result = replace(graph, region, *args, **kwargs)
        for node in graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph):
            if node not in calls:
                REPLACED[node] = [n.meta.get("repro_state") for n in region]
                if shared:
                    ALIASED.append(("graph_validity:subgraph_aliasing",
                                    f"{node.name} replaces a region whose {shared[0]} alias"))
        return result

    output_graph.SubgraphTracer.create_proxy = recording_create_proxy
    GraphRegionTracker.get_identical_regions = recording_regions
    output_graph.OutputGraph.__init__ = recording_init
    output_graph.apply_graph_deduplication = recording_dedup
    graph_deduplication._replace_region_with_subgraph = recording_replace


def misplaced(root, graph, entry):
    """(label, line) of ops and subgraph calls that run under another
    grad/autocast state than they (their body's ops) were traced under: the
    state replayed along the graph's own set_grad_enabled and autocast
    nodes, from its frame's entry."""
    grad, autocast, stack, found = entry["grad"], entry["autocast_cpu"], [], []
    for node in graph.nodes:
        if node.target is torch._C._set_grad_enabled:
            grad = bool(node.args[0])
            continue
        if node.target is torch.amp._enter_autocast:
            stack.append((grad, autocast))
            autocast = str(node.args[1]) if node.args[2] else None
            continue
        if node.target is torch.autograd.grad_mode._enter_inference_mode:
            stack.append((grad, autocast))
            grad = grad and not (node.args and node.args[0])
            continue
        if node.target in (torch.amp._exit_autocast, torch.autograd.grad_mode._exit_inference_mode):
            grad, autocast = stack.pop() if stack else (grad, autocast)
            continue
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        call = node.target is torch.ops.higher_order.invoke_subgraph
        if call:
            # the region this call replaced, else (a nested_compile_region) its body
            states = REPLACED.get(node) or [n.meta.get("repro_state") for n in getattr(root, node.args[0].target).graph.nodes]
        else:
            states = [node.meta.get("repro_state")]
        traced = {(s["grad"], s["autocast_cpu"]) for s in states if s}
        if traced and traced != {(grad, autocast)}:
            field = "grad" if any(g != grad for g, _ in traced) else "autocast_cpu"
            found.append((f"graph_validity:ambient:{field}:{'region' if call else 'op'}",
                          f"{node.name} runs under grad={grad}, autocast={autocast}; its ops were "
                          f"traced under (grad, autocast) {sorted(traced, key=str)}"))
    return found


def aliasing(region):
    """The oracle's reading (harness.structure.region_hazards) of a region
    that cannot become a subgraph call: two inputs, an output and an input,
    or two outputs share storage (but for the elements of one tuple output)."""
    def key(node):
        value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
        try:
            return StorageWeakRef(value.untyped_storage()) if isinstance(value, torch.Tensor) else None
        except Exception:  # sparse, or a subclass without storage
            return None

    def tuple_element(node):
        parent = node.args[0] if node.target is operator.getitem and node.args else None
        return isinstance(parent, torch.fx.Node) and isinstance(parent.meta.get("example_value"), (tuple, list))

    members, found, inputs, outputs = set(region), [], {}, {}
    for a in dict.fromkeys(a for n in region for a in n.all_input_nodes if a not in members):
        k = key(a)
        if k is not None and k in inputs and not tuple_element(a):
            found.append(f"inputs {inputs[k].name} and {a.name}")
        if k is not None:
            inputs.setdefault(k, a)
    for n in region:
        k = key(n) if any(u not in members for u in n.users) else None
        if k is None:
            continue
        if k in inputs:
            found.append(f"output {n.name} and input {inputs[k].name}")
        elif k in outputs:
            found.append(f"outputs {outputs[k].name} and {n.name}")
        outputs.setdefault(k, n)
    return found


def in_subgraphs(root, graph):
    """(label, line) of subgraphs the pass made that write or return their own inputs."""
    found = []
    for node in graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph):
        sub = getattr(root, node.args[0].target, None) if node in REPLACED else None
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        placeholders = set(sub.graph.find_nodes(op="placeholder"))
        for n in sub.graph.nodes:
            name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
            if n.op in ("call_method", "call_function") and name.endswith("_") and not name.startswith("_") \
                    and n.args and n.args[0] in placeholders:
                found.append(("graph_validity:subgraph_input_mutation", f"{node.name}: {n.name} writes input {n.args[0].name}"))
        for out in sub.graph.find_nodes(op="output"):
            returned = [a for a in out.all_input_nodes if a in placeholders]
            if returned:
                found.append(("graph_validity:subgraph_aliasing", f"{node.name}: subgraph returns its input {returned[0].name}"))
    return found


def group_differences():
    """(label, line) of every distinct way a region differs from its group's first."""
    found = {}
    for g, group in enumerate(GROUPS):
        ref = group[0]
        for r, described in enumerate(group[1:], 1):
            if len(described) != len(ref):
                found.setdefault("size", f"group {g}: regions of {len(ref)} and {len(described)} nodes")
                continue
            for label, what, a, b in _pair_differences(ref, described):
                found.setdefault(label, f"group {g}: node {b.name} of region {r} vs {a.name} of region 0: {what}")
    return [(f"region_identity:{label}", line) for label, line in found.items()]


def main():
    global ENTRY
    install()
    torch.manual_seed(SEED)
    configure(True)
    ENTRY = state()
    broken, compiler = [], torch._dynamo.lookup_backend(backend())  # resolved (a plugin entered) before compiling

    def lint(graph):
        try:
            graph.lint()
        except Exception as e:
            broken.append(f"graph.lint(): {str(e).splitlines()[0]}")

    def linted(gm, example_inputs):  # what the backend receives must be a valid graph
        lint(gm.graph)
        return compiler(gm, example_inputs)

    try:
        torch.compile(Program(), backend=linted, **COMPILE_KWARGS)(*make_inputs())
    except Exception:
        traceback.print_exc()  # the groups and graphs were recorded before the failure
    for root, graph, entry in AFTER:  # as the pass left it: a later step may have failed on it
        lint(graph)
    found = [("graph_validity:lint", line) for line in dict.fromkeys(broken)]
    found += [f for root, graph, entry in AFTER for f in misplaced(root, graph, entry) + in_subgraphs(root, graph)]
    found += ALIASED + group_differences()
    for label, line in found:
        print(f"[{label}] {line}")
    mine = [label for label, _ in found if EXPECT is None or fnmatch.fnmatchcase(label, EXPECT)]
    print(f"expected: every region of a group identical and the graph valid; actual: {len(found)} difference(s) "
          f"({len(GROUPS)} group(s))")
    if mine:
        print(f"REPRODUCED: {mine[0]}: the pass leaves an invalid graph or deduplicates regions that differ "
              f"(torch {torch.__version__})")
        return 1
    if found:
        print(f"FAILS DIFFERENTLY (exit 3): expected {EXPECT}, saw only {sorted({label for label, _ in found})}")
        return 3
    print(f"not reproduced: every region of every group alike (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
