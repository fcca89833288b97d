"""Records what the deduplication pass saw and did, for the structural oracles.

Wrapping, never replacing, the real code for the duration of one capture:

- ``SubgraphTracer.create_proxy``: the global state each node was traced
  under, and which call of the block traced it (the inlining frame);
- ``OutputGraph.__init__``: the state a frame's graph starts from;
- ``apply_graph_deduplication``: a copy of the graph before the pass;
- ``GraphRegionTracker.get_identical_regions``: each region group, described
  as plain data while its nodes still exist (the pass erases them);
- ``_replace_region_with_subgraph``: which regions became an
  ``invoke_subgraph`` call and which were skipped, with this module's own
  reading of input mutation and aliasing for every region;
- the backend: the graph handed to it, and both graphs run on the same inputs.
"""

from __future__ import annotations

import contextlib
import operator
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import torch
import torch.fx
from torch._dynamo import graph_deduplication, output_graph
from torch._dynamo.graph_region_tracker import GraphRegionTracker
from torch.utils._pytree import tree_flatten

from .ambient import ambient_state
from .clock import in_harness
from .effects import example_value, storage_key, written_args
from .outcome import Execution, RegionNode

INVOKE_SUBGRAPH = torch.ops.higher_order.invoke_subgraph
CALLS = ("call_function", "call_method", "call_module")  # node ops that compute


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


@dataclass
class NodeDesc:
    """A region node as plain data. Each argument is ``("node", i)`` (the
    region's i-th node), ``("input", k, meta)`` (its k-th distinct external
    input) or ``("const", type, value)``, keyed by position or keyword."""

    name: str
    op: str
    target: str
    args: list[tuple[str, tuple]]
    value: Optional[dict[str, Any]]
    ambient: Optional[dict[str, Any]]


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


@dataclass
class Replacement:
    group: int
    region: int
    nodes: list[str]
    invoke: Optional[str]  # the invoke_subgraph node, or None if the pass skipped the region
    input_mutations: list[str] = field(default_factory=list)  # nodes writing to external inputs
    aliasing: list[str] = field(default_factory=list)  # "a and b share storage"


@dataclass
class NodeRecord:
    ambient: dict[str, Any]
    instance: Optional[int]  # which call of the block (trace order), None outside it
    # Each sub-block call it was traced inside, outermost first: (sub-block, call serial).
    subs: tuple[tuple[str, int], ...] = ()


@dataclass
class GraphRecord:
    """One frame's graph through the pass."""

    entry_ambient: dict[str, Any] = field(default_factory=dict)
    pre: Optional[torch.fx.GraphModule] = None  # copy taken before the pass
    post: Optional[torch.fx.GraphModule] = None  # copy of what the backend received
    nodes: dict[str, NodeRecord] = field(default_factory=dict)  # pre-pass nodes by name
    groups: list[list[list[NodeDesc]]] = field(default_factory=list)
    # The tracker's nodes with equal keys, before any region is grown (names).
    duplicates: list[list[str]] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    # The writes the tracker itself saw ("writer arg": its
    # node_to_mutated_arg_positions, from tensor version counters, read at
    # the positions the pass's own mutation check reads them): the writes the
    # pass is meant to keep regions and order around.
    tracked_writes: list[str] = field(default_factory=list)
    # Both graphs run eagerly on the same inputs: (pre, pre again, post).
    rewrite: Optional[tuple[Execution, Execution, Execution]] = None
    # Where the pass ran before the graph had its output (torch 2.7): the
    # nodes it replaced, by the name of their replacement; None otherwise.
    renamed: Optional[dict[str, str]] = None

    def invoked(self) -> dict[str, list[str]]:
        """Each invoke_subgraph call the pass made -> the nodes of the region it replaced."""
        return {rep.invoke: rep.nodes for rep in self.replacements if rep.invoke}


def tracked_writes(tracker: Any) -> list[str]:
    """``"writer arg"`` for each argument the tracker recorded a node writing,
    the arguments flattened as the pass flattens them (``map_arg``)."""
    out = []
    for node, positions in getattr(tracker, "node_to_mutated_arg_positions", {}).items():
        flat: list = []
        torch.fx.node.map_arg((node.args, node.kwargs), flat.append)
        out += [f"{node.name} {flat[i].name}" for i in positions if i < len(flat)]
    return out


def copy_graph_module(root: Any, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    out = g.graph_copy(graph, {})
    g.output(out)
    return torch.fx.GraphModule(root, g)


def close_open_graph(pre: torch.fx.GraphModule, post: torch.fx.GraphModule, renamed: dict[str, str]) -> bool:
    """Give ``pre`` (copied before a pass that ran ahead of the output node)
    the outputs ``post`` has, each mapped back to the node the pass replaced;
    False when some output has no node before the pass (then the rewrite
    cannot be judged on this graph)."""
    by_name = {n.name: n for n in pre.graph.nodes}
    (out,) = post.graph.find_nodes(op="output")
    missing: list[str] = []

    def back(a: torch.fx.Node) -> Any:
        name = renamed.get(a.name, a.name)
        if name not in by_name:
            missing.append(name)
            return None
        return by_name[name]

    args = torch.fx.node.map_arg(out.args[0], back)
    if missing:
        return False
    for old in pre.graph.find_nodes(op="output"):
        pre.graph.erase_node(old)
    pre.graph.output(args)
    pre.recompile()
    return True


def graph_module_of(root: Any, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """A copy, or the graph itself when it cannot be copied (a node used
    before it is defined cannot be copied in order)."""
    try:
        return copy_graph_module(root, graph)
    except Exception:
        return torch.fx.GraphModule(root, graph)


class StructureRecorder:
    """Collects GraphRecords for one capture; ``block_code`` names the block's
    code object, so nodes can be attributed to the call that traced them."""

    def __init__(self, block_code: Any = None, sub_codes: Optional[dict[Any, str]] = None) -> None:
        self.block_code = block_code
        self.sub_codes = sub_codes or {}  # code object -> sub-block name
        self.graphs: list[GraphRecord] = []
        self._records: dict[torch.fx.Node, NodeRecord] = {}
        self._entry: dict[int, dict[str, Any]] = {}  # id(OutputGraph) -> state when it was made
        self._last_entry: dict[str, Any] = {}
        self._instances: dict[int, tuple[Any, int]] = {}  # id(tx) -> (tx, serial): keeps tx alive
        self._current: Optional[GraphRecord] = None

    # -- per node ------------------------------------------------------------
    def _instance(self, tx: Any) -> Optional[int]:
        while tx is not None:
            if getattr(tx, "f_code", None) is self.block_code:
                entry = self._instances.setdefault(id(tx), (tx, len(self._instances)))
                return entry[1]
            tx = getattr(tx, "parent", None)
        return None

    def _subs(self, tx: Any) -> tuple[tuple[str, int], ...]:
        chain = []
        while tx is not None:
            name = self.sub_codes.get(getattr(tx, "f_code", None))
            if name is not None:
                chain.append((name, self._instances.setdefault(id(tx), (tx, len(self._instances)))[1]))
            tx = getattr(tx, "parent", None)
        return tuple(reversed(chain))

    def on_node(self, tracer: Any, node: torch.fx.Node) -> None:
        tx = getattr(tracer.output_graph, "current_tx", None)
        self._records[node] = NodeRecord(ambient_state(), self._instance(tx) if self.block_code else None,
                                         self._subs(tx) if self.sub_codes else ())

    # -- per graph -------------------------------------------------------------
    def on_output_graph(self, og: Any) -> None:
        """A frame's trace starts: the state its graph starts from."""
        self._entry[id(og)] = self._last_entry = ambient_state()

    def before_dedup(self, og: Any) -> None:
        record = GraphRecord(entry_ambient=self._entry.get(id(og), {}))
        try:
            record.pre = copy_graph_module(output_graph.FakeRootModule(og.nn_modules), og.graph)
        except Exception:  # a graph torch cannot copy: recorded without it, never failed here
            record.pre = None
        if not og.graph.find_nodes(op="output"):  # the pass runs before the outputs exist (torch 2.7)
            record.renamed = {}
        record.nodes = {n.name: self._records[n] for n in og.graph.nodes if n in self._records}
        self.graphs.append(record)
        self._current = record

    def on_regions(self, tracker: GraphRegionTracker, groups: list[list[list[torch.fx.Node]]]) -> None:
        if self._current is not None:
            self._current.groups = [[self.describe(r) for r in g] for g in groups]
            self._current.duplicates = [[n.name for n in d] for d in tracker.hash_to_duplicates.values() if len(d) > 1]
            self._current.tracked_writes = tracked_writes(tracker)

    def describe(self, region: list[torch.fx.Node]) -> list[NodeDesc]:
        return describe_region(region, lambda node: self._records[node].ambient if node in self._records else None)

    def on_replace(self, graph: torch.fx.Graph, region: list[torch.fx.Node], call: Any) -> None:
        if self._current is None:
            call()
            return
        groups = self._current.groups
        names = [n.name for n in region]
        g, r = next(((gi, ri) for gi, grp in enumerate(groups) for ri, reg in enumerate(grp)
                     if [d.name for d in reg] == names), (-1, -1))
        mutations, aliasing = region_hazards(region)
        before = set(graph.find_nodes(op="call_function", target=INVOKE_SUBGRAPH))
        call()
        new = [n for n in graph.find_nodes(op="call_function", target=INVOKE_SUBGRAPH) if n not in before]
        self._current.replacements.append(
            Replacement(g, r, names, new[0].name if new else None, mutations, aliasing))

    def after_dedup(self, og: Any, result: Any = None) -> None:
        """The graph as the pass left it, in case a later step of the compile
        fails on it; replaced by what the backend receives if it gets there.
        ``result``: what the pass returned (the output replacements, where it
        runs before the outputs exist)."""
        record = self._current
        if record is None:
            return
        if record.renamed is not None and isinstance(result, dict):
            record.renamed = {new.name: old.name for old, new in result.items()
                              if isinstance(old, torch.fx.Node) and isinstance(new, torch.fx.Node)}
        record.post = graph_module_of(output_graph.FakeRootModule(og.nn_modules), og.graph)

    def on_backend(self, gm: torch.fx.GraphModule, example_inputs: list) -> None:
        record = self._current
        if record is None:
            record = GraphRecord(entry_ambient=self._last_entry)
            self.graphs.append(record)
        self._current = None
        # a broken graph (torch 2.7: an output naming a node the pass erased)
        # must fail in the backend as it would without this recorder
        record.post = graph_module_of(gm, gm.graph)
        # outputs with no node before the pass: nothing to run the post graph against
        closed = record.pre is not None and (record.renamed is None or close_open_graph(record.pre, gm, record.renamed))
        if closed and any(r.invoke for r in record.replacements):
            record.rewrite = run_rewrite(record.pre, gm, example_inputs)


def _tuple_element(node: torch.fx.Node) -> bool:
    parent = node.args[0] if node.target is operator.getitem and node.args else None
    return isinstance(parent, torch.fx.Node) and isinstance(example_value(parent), (tuple, list))


def region_hazards(region: list[torch.fx.Node]) -> tuple[list[str], list[str]]:
    """This harness's own reading of why a region cannot become a subgraph
    call: it writes to a value from outside the region (or a view of one), or
    two inputs, an output and an input, or two outputs share storage."""
    members = set(region)
    external = [a for n in region for a in n.all_input_nodes if a not in members]
    in_storages: dict[Any, torch.fx.Node] = {}
    aliasing = []
    for a in dict.fromkeys(external):
        key = storage_key(example_value(a))
        if key is None:
            continue
        # two inputs of one storage (x and x[..., :1]): torch's pass refuses
        # these too, but for the elements of one tuple output (chunk, split)
        if key in in_storages and not _tuple_element(a):
            aliasing.append(f"inputs {in_storages[key].name} and {a.name}")
        in_storages.setdefault(key, a)
    mutations = []
    for n in region:
        for w in written_args(n):
            if w not in members or storage_key(example_value(w)) in in_storages:
                mutations.append(f"{n.name} writes {w.name}")
    out_storages: dict[Any, torch.fx.Node] = {}
    for n in region:
        if not any(u not in members for u in n.users):
            continue
        key = storage_key(example_value(n))
        if key is None:
            continue
        if key in in_storages:
            aliasing.append(f"output {n.name} and input {in_storages[key].name}")
        elif key in out_storages:
            aliasing.append(f"outputs {out_storages[key].name} and {n.name}")
        out_storages.setdefault(key, n)
    return mutations, aliasing


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad and x.is_floating_point())
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        # its example value, read without a guard: running a graph on the symbol itself inside the
        # compile would guard the frame on it (a recompile of the next call the compile never made)
        hint = x.node.hint
        return x if hint is None else hint
    return x


@contextlib.contextmanager
def _eager_in_compile() -> Iterator[None]:
    """Real tensors through graphs run inside the compile: an eager
    invoke_subgraph traces its body with the tracing context's fake mode
    (forward from torch 2.10, backward always), which rejects real inputs
    ("Please convert all Tensors to FakeTensors first"). That mode, not a new
    one (its subgraphs hold its fake values: torch 2.8 asserts the modes
    match), lets them in while the oracle runs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    context = torch._guards.TracingContext.try_get()
    mode = getattr(context, "fake_mode", None)
    if mode is None:
        with torch._guards.tracing(torch._guards.TracingContext(FakeTensorMode(allow_non_fake_inputs=True))):
            yield
        return
    saved = mode.allow_non_fake_inputs
    mode.allow_non_fake_inputs = True
    # An eager invoke_subgraph keeps what it traced (its autograd function) in the context's HOP cache under
    # the subgraph's name, and the compile that follows takes it from there: the backend's own subgraph,
    # which it may have changed, was never compiled (a planted backend's fault in a region body went
    # unseen whenever this oracle ran). The runs here get a cache of their own.
    hop_cache = getattr(context, "hop_dispatch_set_cache", None)
    if hop_cache is not None:
        context.hop_dispatch_set_cache = type(hop_cache)()
    try:
        yield
    finally:
        mode.allow_non_fake_inputs = saved
        if hop_cache is not None:
            context.hop_dispatch_set_cache = hop_cache


def run_rewrite(pre: torch.fx.GraphModule, post: torch.fx.GraphModule, example_inputs: list):
    """Runs the graph before and after the pass eagerly on copies of the same
    inputs, forward and backward, with the same random seed."""
    from .execute import execute

    names = [n.name for n in post.graph.find_nodes(op="placeholder")]
    # Inputs the graph lost after the pass come from Dynamo's record of them.
    by_name = {n.name: getattr(n.meta.get("grapharg"), "example", None) for n in pre.graph.find_nodes(op="placeholder")}
    by_name.update(zip(names, example_inputs))
    pre_names = [n.name for n in pre.graph.find_nodes(op="placeholder")]

    def run(gm: torch.fx.GraphModule, order: list[str]) -> Execution:
        inputs = [_clone(by_name.get(n)) for n in order]
        with _eager_in_compile(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return execute(gm, torch.nn.Module(), inputs, order, backward=True)

    return run(pre, pre_names), run(pre, pre_names), run(post, names)


@contextlib.contextmanager
def recording_structure(recorder: StructureRecorder) -> Iterator[None]:
    """Installs the wrappers listed in the module docstring, and removes them."""

    def create_proxy(original):  # type: ignore[no-untyped-def]
        def wrapper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            proxy = original(self, *args, **kwargs)
            with in_harness():
                recorder.on_node(self, proxy.node)
            return proxy

        return wrapper

    def init(original):  # type: ignore[no-untyped-def]
        def wrapper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            with in_harness():
                recorder.on_output_graph(self)
            original(self, *args, **kwargs)

        return wrapper

    def dedup(original):  # type: ignore[no-untyped-def]
        def wrapper(og):  # type: ignore[no-untyped-def]
            with in_harness():
                recorder.before_dedup(og)
            result = original(og)
            with in_harness():
                recorder.after_dedup(og, result)
            return result

        return wrapper

    def regions(original):  # type: ignore[no-untyped-def]
        def wrapper(self, graph):  # type: ignore[no-untyped-def]
            groups = original(self, graph)
            with in_harness():
                recorder.on_regions(self, groups)
            return groups

        return wrapper

    def replace(original):  # type: ignore[no-untyped-def]
        def wrapper(graph, region, *args, **kwargs):  # type: ignore[no-untyped-def]
            recorder.on_replace(graph, region, lambda: original(graph, region, *args, **kwargs))

        return wrapper

    patches = [
        (output_graph.SubgraphTracer, "create_proxy", create_proxy),
        (output_graph.OutputGraph, "__init__", init),
        (output_graph, "apply_graph_deduplication", dedup),  # as output_graph imported it
        (GraphRegionTracker, "get_identical_regions", regions),
        (graph_deduplication, "_replace_region_with_subgraph", replace),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for (owner, name, wrap), (_, _, original) in zip(patches, originals):
        setattr(owner, name, wrap(original))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def region_nodes(groups: list[list[list[NodeDesc]]]) -> list[list[list[RegionNode]]]:
    return [[[RegionNode(d.name, d.op, d.target) for d in region] for region in g] for g in groups]
