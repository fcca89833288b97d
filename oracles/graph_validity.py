"""The graph after the pass is a valid program with the original's order.

Checks, on each graph handed to the backend: ``graph.lint()``; every input
defined before its use; no cycle once the ordering dependencies the pass must
keep are added (an in-place write and every reader of the written storage,
and every node against the grad-mode / autocast / inference-mode switches
around it, in their original relative order); the order of in-place writes
and their readers actually kept; each
node (and every node a subgraph call replaced) running under the grad mode
and autocast state it was traced under, found by replaying the graph's
state-setting nodes in order; and every
``invoke_subgraph`` call's subgraph free of input mutation and of
input/output aliasing, which the HOP does not support.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from typing import Optional

import torch.fx

from harness.ambient import REPLAYED, is_state_node, replay
from harness.effects import example_value, storage_key, written_args
from harness.outcome import Outcome
from harness.structure import CALLS, INVOKE_SUBGRAPH, GraphRecord, target_name

from .verdict import Status, Verdict, combine

NAME = "graph_validity"


def _fail(kind: str, where: str, message: str, label: str = "", **details) -> Verdict:
    return Verdict(NAME, Status.FAIL, kind=kind, where=where, message=message,
                   details={"label": label or kind, **details})


def _lint(graph: torch.fx.Graph, where: str) -> list[Verdict]:
    out = []
    try:
        graph.lint()
    except Exception as e:  # lint raises plain RuntimeErrors
        out.append(_fail("lint", where, f"graph.lint(): {str(e).splitlines()[0][:300]}"))
    seen: set = set()
    for node in graph.nodes:
        missing = [a.name for a in node.all_input_nodes if a not in seen]
        if missing:
            out.append(_fail("use_before_def", where, f"{node.name} uses {', '.join(missing)} before it is defined"))
            break
        seen.add(node)
    return out


def _units(record: GraphRecord) -> dict[str, str]:
    """Post-pass node -> the unit it stands for: itself, or the invoke_subgraph
    call that replaced its region (and that call's getitems)."""
    post = record.post.graph
    invoked = record.invoked()
    unit = {}
    for node in post.nodes:
        unit[node.name] = node.name
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node) and node.args[0].name in invoked:
            unit[node.name] = node.args[0].name
    return unit


def _pre_to_unit(record: GraphRecord, post_names: set[str]) -> dict[str, str]:
    out = {n: invoke for invoke, nodes in record.invoked().items() for n in nodes}
    for node in record.pre.graph.nodes:
        if node.name not in out and node.name in post_names:
            out[node.name] = node.name
    return out


# State-setting targets by the kind of state they set (signature labels).
STATE_KIND = {
    "_set_grad_enabled": "grad",
    "_enter_autocast": "autocast",
    "_exit_autocast": "autocast",
    "_enter_inference_mode": "inference",
    "_exit_inference_mode": "inference",
}


def _constraints(pre: torch.fx.Graph) -> list[tuple[torch.fx.Node, torch.fx.Node, str, str, bool, str]]:
    """(before, after, why, kind, strict, writer) pairs of pre-pass nodes
    (``writer``: the name of the node writing, for an in-place write).

    An in-place write against every reader of the storage it writes must keep
    its order (strict). A node against a grad-mode / autocast / inference-mode
    switch enters only the cycle check, like the dependencies the pass adds
    for autocast: a region on both sides of a switch cannot run under one
    state; moving a node across two switches that cancel out is harmless, and
    the state each node really runs under is checked by ``_ambient``."""
    nodes = list(pre.nodes)
    by_storage: dict = defaultdict(list)
    for n in nodes:
        key = storage_key(example_value(n))
        if key is not None:
            by_storage[key].append(n)
    index = {n: i for i, n in enumerate(nodes)}
    pairs = []
    for m in nodes:
        for w in written_args(m):
            key = storage_key(example_value(w))
            aliases = by_storage.get(key, [w]) if key is not None else [w]
            readers = {u for a in aliases for u in a.users if u is not m}
            for r in readers:
                a, b = (r, m) if index[r] < index[m] else (m, r)
                pairs.append((a, b, f"{m.name} writes {w.name}", "mutation", True, m.name))
    for s in (n for n in nodes if is_state_node(n)):
        kind = STATE_KIND.get(getattr(s.target, "__name__", ""), "state")
        for n in nodes:
            if n is not s and n.op in CALLS:
                a, b = (n, s) if index[n] < index[s] else (s, n)
                pairs.append((a, b, f"{s.name} switches {kind}", kind, False, ""))
    return pairs


def _order(record: GraphRecord, where: str) -> list[Verdict]:
    post = record.post.graph
    unit = _units(record)
    pre_unit = _pre_to_unit(record, set(unit))
    position = {}
    for i, node in enumerate(post.nodes):
        position.setdefault(unit[node.name], i)
    edges: dict[str, set[str]] = defaultdict(set)
    for node in post.nodes:
        for a in node.all_input_nodes:
            if unit[a.name] != unit[node.name]:
                edges[unit[a.name]].add(unit[node.name])
    needed = []
    kind_of: dict[tuple[str, str], str] = {}
    grouped = {d.name for group in record.groups for region in group for d in region}
    for a, b, why, kind, strict, writer in _constraints(record.pre.graph):
        ua, ub = pre_unit.get(a.name), pre_unit.get(b.name)
        if ua and ub and ua != ub:
            edges[ua].add(ub)
            kind_of.setdefault((ua, ub), kind)
            if strict:
                needed.append((ua, ub, f"{a.name} before {b.name} ({why})", kind, writer in grouped))
    cycle = _find_cycle(edges)
    if cycle:
        kinds = sorted({kind_of[e] for e in zip(cycle, cycle[1:]) if e in kind_of}) or ["data"]
        return [_fail("cycle", where, f"cycle through {' -> '.join(cycle)} (ordering kept for: {', '.join(kinds)})",
                      label=f"cycle:{kinds[0]}", cycle=cycle)]
    what = {n.name: f"{n.name} ({target_name(n)})" for n in post.nodes}
    invoked = record.invoked()
    for ua, ub, why, kind, in_group in needed:
        # a unit the graph the backend got no longer holds (a subgraph call a later step removed): no order to judge
        if ua in position and ub in position and position[ua] > position[ub]:
            # a subgraph call the pass made on either side, or two plain ops; for two plain ops,
            # whether the write is a node of a region the tracker grouped (the pass then kept the
            # region as it is, writes being beyond invoke_subgraph, and still reordered around it)
            unit = "region" if ua in invoked or ub in invoked else "op:grouped" if in_group else "op"
            return [_fail("order", where, f"{what[ua]} now runs after {what[ub]}, but originally {why}",
                          label=f"order:{kind}:{unit}")]
    return []


def _find_cycle(edges: dict[str, set[str]]) -> Optional[list[str]]:
    state: dict[str, int] = {}
    for root in list(edges):
        if root in state:
            continue
        stack = [(root, iter(sorted(edges.get(root, ()))))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                state[node] = 2
            elif state.get(child, 0) == 1:
                path = [n for n, _ in stack]
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(edges.get(child, ())))))
    return None


def _ambient(record: GraphRecord, where: str) -> list[Verdict]:
    recorded = {n: r.ambient for n, r in record.nodes.items()}
    pre = record.pre.graph
    expected = replay(pre, record.entry_ambient)
    for node in pre.nodes:
        if node.op in CALLS and node.name in recorded:
            if any(expected[node.name][k] != recorded[node.name].get(k) for k in REPLAYED):
                # The replay does not model this graph's state changes: no verdict on order.
                return [Verdict(NAME, Status.INCONCLUSIVE, kind="ambient_unmodelled", where=where,
                                message=f"replaying state nodes does not reproduce the state {node.name} was traced under")]
    actual = replay(record.post.graph, record.entry_ambient)
    region_of = record.invoked()
    for node in record.post.graph.nodes:
        if node.op not in CALLS:
            continue
        # A subgraph call must run under the state every node of its region was traced under.
        for name in region_of.get(node.name, [node.name]):
            traced = recorded.get(name)
            if traced is None:
                continue
            for k in REPLAYED:
                if actual[node.name][k] != traced.get(k):
                    what = f"{node.name} (replacing {name})" if name != node.name else node.name
                    # a subgraph call the pass made; a state switch that moved
                    # past ops no such call feeds; else plain ops that sank
                    # behind a call
                    unit = "region" if node.name in region_of else _who_moved(record)
                    return [_fail("ambient", where,
                                  f"{what} runs with {k}={actual[node.name][k]!r}, but was traced with {k}={traced.get(k)!r}",
                                  label=f"ambient:{k}:{unit}", node=node.name)]
    return []


def _who_moved(record: GraphRecord) -> str:
    """"switch" when a state switch changed its order against an op that no
    subgraph call the pass made feeds (the switch itself moved); "op"
    otherwise: the ops that read a call's outputs sank behind it, past a
    switch that stayed (the pass orders calls against autocast switches
    only)."""
    calls = set(record.invoked())
    sunk: set[str] = set()
    for n in record.post.graph.nodes:  # in order: a node reading a sunk node is sunk
        if n.name in calls or any(a.name in sunk for a in n.all_input_nodes):
            sunk.add(n.name)
    before = {n.name: i for i, n in enumerate(record.pre.graph.nodes)}
    kept = [n for n in record.post.graph.nodes if n.op in CALLS and n.name in before and n.name not in sunk]
    for i, s in enumerate(kept):
        if not is_state_node(s):
            continue
        for j, other in enumerate(kept):
            if not is_state_node(other) and (i < j) != (before[s.name] < before[other.name]):
                return "switch"
    return "op"


def _subgraphs(record: GraphRecord, where: str) -> list[Verdict]:
    out = []
    for rep in record.replacements:
        if rep.invoke and rep.input_mutations:
            # "tracked": the tracker itself recorded this node writing the
            # region's input as its argument (a version counter moved on
            # it), which the pass's own check reads, so the check was skipped; "untracked": a write its check cannot see
            # (through a view made inside the region, an op writing an
            # argument it does not record).
            writer, _, written = rep.input_mutations[0].partition(" writes ")
            direct = written not in rep.nodes  # the region's input itself, not a view made inside it
            seen = "tracked" if direct and f"{writer} {written}" in record.tracked_writes else "untracked"
            out.append(_fail("subgraph_input_mutation", where,
                             f"{rep.invoke} replaces a region that writes to its inputs: {rep.input_mutations[0]} "
                             f"({'a write the tracker recorded' if seen == 'tracked' else 'a write the tracker did not see'})",
                             label=f"subgraph_input_mutation:{seen}"))
        if rep.invoke and rep.aliasing:
            out.append(_fail("subgraph_aliasing", where, f"{rep.invoke} replaces a region whose {rep.aliasing[0]} alias"))
    # Only the subgraphs the pass made: Dynamo's own nested_compile_region
    # subgraphs may write their inputs (torch functionalizes such a call).
    made = set(record.invoked())
    for node in record.post.graph.find_nodes(op="call_function", target=INVOKE_SUBGRAPH):
        if node.name not in made:
            continue
        sub = getattr(record.post, node.args[0].target, None) if isinstance(node.args[0], torch.fx.Node) else None
        if not isinstance(sub, torch.fx.GraphModule):
            continue
        placeholders = set(sub.graph.find_nodes(op="placeholder"))
        for n in sub.graph.nodes:
            hit = [w.name for w in written_args(n) if w in placeholders]
            if hit:
                out.append(_fail("subgraph_input_mutation", where, f"{node.name}: subgraph node {n.name} writes input {hit[0]}"))
        output = next(iter(sub.graph.find_nodes(op="output")), None)
        if output is not None:
            returned = [a for a in output.all_input_nodes if a in placeholders]
            if returned:
                out.append(_fail("subgraph_aliasing", where, f"{node.name}: subgraph returns its input {returned[0].name}"))
    return out


def check(outcome: Outcome) -> Verdict:
    verdicts = []
    graphs = 0
    for g_index, record in enumerate(outcome.capture.structure):
        if record.post is None:
            continue
        graphs += 1
        where = f"graph[{g_index}]"
        post = record.post.graph
        held = set(post.nodes)
        if any(a not in held for n in held for a in n.all_input_nodes):
            verdicts += _lint(post, where)  # a graph naming nodes it lacks: nothing more to read in it
            continue
        if record.pre is not None:
            verdicts += _order(record, where)
        verdicts += _lint(post, where)
        verdicts += _subgraphs(record, where)
        if record.pre is not None and not any(v.failed for v in verdicts):
            verdicts += _ambient(record, where)
    if not verdicts:
        return Verdict(NAME, Status.PASS, message=f"{graphs} graphs valid")
    first = combine(NAME, verdicts)
    if first.failed:  # every distinct fault, each label once: a known one must not hide a new one
        found = {}
        for v in verdicts:
            if v.failed:
                found.setdefault(v.details["label"], {**v.details, "kind": v.kind, "where": v.where, "message": v.message})
        first.details["differences"] = list(found.values())
    return first
