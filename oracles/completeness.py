"""Completeness against ground truth: repeats the generator knows to be
identical should end up deduplicated, unless a documented rule of the pass
excludes them. A miss is a lower-severity finding ("missed optimization"),
kept apart from wrong results by the oracle catalogue.

Repeats are matched to graph nodes through the harness's recording of which
inlined call of the block traced each node (``NodeRecord.instance``); when the
calls traced do not line up one-to-one with the program's repeats (a frame
compiled once and reused, say), the oracle says so and judges nothing.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Optional

import torch.fx

from harness.effects import example_value
from generators.codegen import sub_callable
from generators.returns import RETURNS, SINGLE
from generators.settings import SETTINGS
from harness.outcome import Outcome
from harness.structure import CALLS, INVOKE_SUBGRAPH, GraphRecord, region_hazards, value_meta

from .region_reuse import REFUSED, said
from .verdict import Status, Verdict

NAME = "completeness"
SOURCE = "https://github.com/pytorch/pytorch/blob/v2.13.0/"


@dataclass
class Repeat:
    """One call of the block as traced: its nodes in one graph."""

    index: int
    graph: int
    record: GraphRecord
    nodes: list[torch.fx.Node]

    @property
    def external(self) -> list[torch.fx.Node]:
        members = set(self.nodes)
        seen: dict = {}
        for n in self.nodes:
            for a in n.all_input_nodes:
                if a not in members:
                    seen.setdefault(a, None)
        return list(seen)

    def _pieces(self) -> dict:
        """node -> the root of its connected piece (along arguments inside the call)."""
        parent = {n: n for n in self.nodes}

        def find(n):  # type: ignore[no-untyped-def]
            while parent[n] is not n:
                n = parent[n]
            return n

        for n in self.nodes:
            for a in n.all_input_nodes:
                if a in parent:
                    parent[find(a)] = find(n)
        return {n: find(n) for n in self.nodes}

    def largest_component(self) -> int:
        """Nodes in the largest connected piece of this call: the tracker grows
        regions along arguments, so unconnected nodes never share a region."""
        sizes: dict = defaultdict(int)
        for root in self._pieces().values():
            sizes[root] += 1
        return max(sizes.values(), default=0)

    def outputs(self) -> list[torch.fx.Node]:
        members = set(self.nodes)
        return [n for n in self.nodes if any(u not in members for u in n.users)] or self.nodes[-1:]

    def heads(self) -> list[torch.fx.Node]:
        """Where the tracker's growth of this call starts: the sinks (no user
        inside the call) of each connected piece of two nodes or more, a
        dead piece included (a call's outputs may be a lone node the pass
        rightly leaves alone while a piece beside it could merge)."""
        pieces, members = self._pieces(), set(self.nodes)
        sizes: dict = defaultdict(int)
        for root in pieces.values():
            sizes[root] += 1
        return [n for n in self.nodes if sizes[pieces[n]] >= 2 and not any(u in members for u in n.users)] \
            or self.outputs()

    @functools.cached_property
    def hazards(self) -> tuple[list[str], list[str]]:
        """(input mutations, aliasing), as harness.structure reads a region."""
        return region_hazards(self.nodes)

    def signature(self) -> tuple:
        return _metadata(self.external)


def _metadata(nodes: list) -> tuple:
    """What the tracker's key sees of a call's inputs."""
    return tuple(str(value_meta(example_value(a))) for a in nodes)


@dataclass(frozen=True)
class Exclusion:
    name: str
    rule: str
    code: str
    applies: Callable[[Repeat], bool]


# Documented reasons the pass leaves identical repeats alone; each with the
# code that implements it.
EXCLUSIONS: tuple[Exclusion, ...] = (
    Exclusion("single_node", "regions of one node are not deduplicated (a region is connected)",
              SOURCE + "torch/_dynamo/graph_region_tracker.py (get_identical_regions: len(region_group[0]) > 1)",
              lambda r: r.largest_component() < 2),
    Exclusion("no_external_inputs", "regions without inputs are skipped",
              SOURCE + "torch/_dynamo/graph_deduplication.py (apply_graph_deduplication: 'Ignore regions with no args')",
              lambda r: not r.external),
    Exclusion("input_mutation", "a region that writes to its inputs cannot become a subgraph call",
              SOURCE + "torch/_dynamo/graph_deduplication.py (_replace_region_with_subgraph: 'NYI ... due to mutation')",
              lambda r: bool(r.hazards[0])),
    Exclusion("aliasing", "input/output and output/output aliasing is not supported by HOPs",
              SOURCE + "torch/_dynamo/graph_deduplication.py (_has_aliasing)",
              lambda r: bool(r.hazards[1])),
)
# Rules that split a class before judging it: the pass only merges regions in
# one graph whose inputs have the same metadata (the tracker's node hash).
PARTITIONS = {
    "different_graph": SOURCE + "torch/_dynamo/output_graph.py (dedup_pass: one OutputGraph at a time)",
    "input_metadata": SOURCE + "torch/_dynamo/graph_region_tracker.py (_hash_node: example-value metadata of the arguments)",
}


def _traced_repeats(outcome: Outcome) -> Optional[list[Repeat]]:
    found: dict[int, Repeat] = {}
    for g, record in enumerate(outcome.capture.structure):
        if record.pre is None:
            return None
        for node in record.pre.graph.nodes:
            rec = record.nodes.get(node.name)
            if node.op not in CALLS or rec is None or rec.instance is None:
                continue
            found.setdefault(rec.instance, Repeat(0, g, record, [])).nodes.append(node)
    repeats = [found[k] for k in sorted(found)]
    for i, r in enumerate(repeats):
        r.index = i
    return repeats


def _skipped_by_pass(r: Repeat) -> Optional[str]:
    """The rule that made the pass skip a region holding this repeat's nodes,
    by this harness's own reading of the region (see harness.structure)."""
    names = {n.name for n in r.nodes}
    for rep in r.record.replacements:
        if rep.invoke is None and names & set(rep.nodes):
            if rep.input_mutations:
                return "input_mutation"
            if rep.aliasing:
                return "aliasing"
    return None


def _merged(r: Repeat) -> bool:
    replaced = {n for nodes in r.record.invoked().values() for n in nodes}
    if any(n.name in replaced for n in r.nodes):
        return True
    # nested_compile_region: Dynamo itself made the call a subgraph call.
    return any(n.target is INVOKE_SUBGRAPH for n in r.nodes)


def _diagnose(r: Repeat, group: list[int], repeats: list[Repeat]) -> str:
    """Read from where the tracker grows regions (``Repeat.heads``).
    "unmatched": the tracker gave the result nodes of this call and of an
    identical one different keys. "blocked": the same key, but no region grew
    from them, and why, as far as the tracker's own record tells:
    "blocked:claimed" (a node of this call or of a partner went to a region
    the tracker returned: greedy growth, largest groups first), "blocked:mixed"
    (the key's bucket also holds a node of a call that is not identical to
    this one: a group grows only as far as every member can), "blocked:crowded"
    (the bucket holds several nodes of this very call, the same op at two places
    or ops the tracker keys alike: members grown from them do not match),
    "blocked:unreplaced" (the tracker returned a region of these nodes, and
    the pass did not replace it), "blocked:differ" (a node the results read
    is keyed apart from every partner's: growth stops at the first step) and
    "blocked:dropped" (none of these: the duplicates were found, every member
    is an identical call keyed alike past its results, yet no region came
    back)."""
    outs = {n.name for n in r.heads()}
    same_graph = [repeats[i] for i in group if repeats[i].graph == r.graph]
    partners = {n.name for m in same_graph if m.index != r.index for n in m.heads()}
    bucket = next((set(names) for names in r.record.duplicates if outs & set(names) and partners & set(names)), None)
    if bucket is None:
        return "unmatched"
    returned = {d.name for g in r.record.groups for region in g for d in region}
    members = {n.name for m in same_graph for n in m.nodes}
    if members & returned:
        ours = {n.name for n in r.nodes}
        return "blocked:unreplaced" if any(set(d.name for d in region) <= ours for g in r.record.groups
                                           for region in g) else "blocked:claimed"
    if bucket - members:
        return "blocked:mixed"
    if len(bucket & {n.name for n in r.nodes}) > 1:  # the key is not one place of the call: regions grow in lockstep
        return "blocked:crowded"
    # The first step of growth: the nodes of this call its results read.
    # Where the tracker keyed one of them apart from every partner's, the
    # calls were not alike to it past their results (a symbol specialized
    # half-way, a layout that differs): growth stops there by design.
    ours = {n.name for n in r.nodes}
    theirs = members - ours
    for out in r.heads():
        for arg in out.all_input_nodes:
            if arg.name in ours and not any(arg.name in names and theirs & set(names)
                                            for names in r.record.duplicates):
                return "blocked:differ"
    return "blocked:dropped"


def _shapes(r: Repeat) -> str:
    """Symbolic shapes are their own class, at every level: a symbol
    specialized half-way through tracing changes the tracker's keys of the
    nodes traced after it (and of those reading values made before it)."""
    symbolic = any(isinstance(example_value(n), torch.SymInt) for n in r.record.pre.graph.find_nodes(op="placeholder"))
    return "dynamic" if symbolic else "static"


def check(outcome: Outcome) -> Verdict:
    program = outcome.program
    if not outcome.config.dedup:
        return Verdict(NAME, Status.PASS, message="deduplication off")
    failure = outcome.compiled.failure
    if failure is not None and failure.stage in ("dynamo", "backend_compile"):
        return Verdict(NAME, Status.INCONCLUSIVE, kind="not_compiled", message="the program did not compile")
    if program is None:
        return _check_model(outcome)
    if program.block.compile_region:
        if any(SETTINGS[n].patch == (("dynamo.inline_invoke_subgraph", True),) for n in program.options.settings
               if n in SETTINGS):
            # every invoke_subgraph is inlined after the pass: the backend (and a repro) sees one flat graph, so
            # two subgraphs for identical calls cost nothing and cannot be shown
            return Verdict(NAME, Status.PASS, message="every subgraph call inlined (settings): merging moot")
        return _check_compile_region(outcome)
    repeats = _traced_repeats(outcome)
    expected = len(program.repeats())
    if repeats is None or len(repeats) != expected:
        n = "no" if repeats is None else len(repeats)
        return Verdict(NAME, Status.INCONCLUSIVE, kind="unmapped",
                       message=f"{n} traced calls of the block for {expected} repeats")
    missed, excluded = [], defaultdict(list)
    for group in program.identical_repeats():
        if len(group) < 2:
            continue
        parts: dict[tuple, list[Repeat]] = defaultdict(list)
        for i in group:
            r = repeats[i]
            rule = next((e.name for e in EXCLUSIONS if e.applies(r)), None) or _skipped_by_pass(r)
            if rule is not None:
                excluded[rule].append(i)
                continue
            parts[(r.graph, r.signature())].append(r)
        for (graph, _), members in parts.items():
            if len(members) < 2:
                excluded["different_graph" if any(k[0] != graph for k in parts) else "input_metadata"].append(members[0].index)
                continue
            missed += [(r, [m.index for m in members]) for r in members if not _merged(r)]
    if not missed:
        missed, level = _missed_sub_calls(outcome, repeats, excluded), "sub"
    else:
        level = "layer"
    links = {e.name: e.code for e in EXCLUSIONS} | PARTITIONS
    details = {"excluded": dict(excluded), "rules": {k: links[k] for k in excluded}}
    if missed and level == "sub":
        r, group = missed[0]
        calls = program.block_calls()
        details["label"] = f"missed:sub:{_shapes(r)}:{_diagnose(r, group, r.peers)}"
        details["sub"] = sub_callable(r.name, program.sub(r.name).kind)  # what its repro looks for
        return Verdict(NAME, Status.FAIL, kind="missed_merge", where=f"{r.name}[{r.index}]",
                       message=f"call {r.index} of sub-block {r.name!r} (path {calls[r.call].path}) is identical "
                               f"to its calls {[i for i in group if i != r.index]} in graph {r.graph}, outside any "
                               f"deduplicated layer repeat, but none of its {len(r.nodes)} nodes was deduplicated",
                       details={**details, "missed": [m.index for m, _ in missed]})
    if missed:
        r, group = missed[0]
        details["label"] = f"missed:{_shapes(r)}:{_diagnose(r, group, repeats)}"
        return Verdict(NAME, Status.FAIL, kind="missed_merge", where=f"repeat[{r.index}]",
                       message=f"repeat {r.index} is identical to repeats {[i for i in group if i != r.index]} "
                               f"in graph {r.graph} but none of its {len(r.nodes)} nodes was deduplicated",
                       details={**details, "missed": [m.index for m, _ in missed]})
    return Verdict(NAME, Status.PASS, message="every identical repeat deduplicated or excluded by a rule", details=details)


@dataclass
class SubCall(Repeat):
    """One call of a sub-block as traced (``index``: among that sub-block's calls)."""

    name: str = ""
    call: int = 0  # index into Program.block_calls()
    repeat: int = 0  # the layer repeat it ran in
    peers: list = None  # type: ignore[assignment]  # the traced calls of the same sub-block


def _traced_sub_calls(outcome: Outcome) -> dict[str, list[SubCall]]:
    """Per sub-block, its traced calls in trace order (a call's nodes include
    those of the sub-blocks it calls)."""
    found: dict[tuple[str, int], SubCall] = {}
    for g, record in enumerate(outcome.capture.structure):
        for node in record.pre.graph.nodes:
            rec = record.nodes.get(node.name)
            if node.op not in CALLS or rec is None:
                continue
            for key in rec.subs:
                found.setdefault(key, SubCall(0, g, record, [], name=key[0])).nodes.append(node)
    out: dict[str, list[SubCall]] = defaultdict(list)
    for key in sorted(found, key=lambda k: k[1]):
        out[key[0]].append(found[key])
    return out


def _missed_sub_calls(outcome: Outcome, repeats: list[Repeat], excluded: dict) -> list[tuple[SubCall, list[int]]]:
    """Identical calls of a sub-block that the pass left whole, judged only
    outside layer repeats it deduplicated (a deduplicated layer repeat holds
    its sub-block calls inside one subgraph) and only where the traced calls
    line up with the program's. Decorated sub-blocks and what they call run
    inside invoke_subgraph bodies: not judged here."""
    program = outcome.program
    calls = program.block_calls()
    decorated = {b.name for b in program.blocks() if b.compile_region}
    traced = _traced_sub_calls(outcome)
    merged_repeats = {r.index for r in repeats if _merged(r)}
    missed = []
    for name, groups in program.identical_calls().items():
        mine = [i for i, c in enumerate(calls) if c.block == name]
        if not name or len(traced.get(name, ())) != len(mine):
            continue
        if name in decorated or any(b in decorated for i in mine for b, _ in calls[i].path):
            continue
        by_call = dict(zip(mine, traced[name]))
        for k, sc in enumerate(traced[name]):
            sc.index, sc.call, sc.repeat, sc.peers = k, mine[k], calls[mine[k]].repeat, traced[name]
        for group in groups:
            members = [by_call[i] for i in group if calls[i].repeat not in merged_repeats]
            parts: dict[tuple, list[SubCall]] = defaultdict(list)
            for sc in members:
                rule = next((e.name for e in EXCLUSIONS if e.applies(sc)), None) or _skipped_by_pass(sc)
                if rule is not None:
                    excluded[rule].append(f"{name}[{sc.index}]")
                    continue
                parts[(sc.graph, sc.signature())].append(sc)
            for part in parts.values():
                if len(part) > 1 and not any(_merged(sc) for sc in part):
                    missed += [(sc, [m.index for m in part]) for sc in part]
    return missed


@functools.lru_cache(maxsize=None)
def _reuse_needs_tensor_outputs() -> bool:
    """Whether this torch's nested_compile_region reuses a traced body only when it returns a tensor or a
    tuple/list of tensors (``is_reuse_eligible``, a documented limitation of its reuse cache)."""
    from torch._dynamo.variables import invoke_subgraph

    return hasattr(invoke_subgraph, "is_reuse_eligible")


def _outputs_reusable(kind: str) -> bool:
    """A block returning ``kind`` (generators.returns) gives torch's reuse check only tensors."""
    if kind == SINGLE:
        return True
    ret = RETURNS[kind]
    return not ret.python and ret.container in ("tuple", "list")


def subgraph_calls(gm: torch.fx.GraphModule) -> list[tuple[str, tuple]]:
    """Each invoke_subgraph call of a graph, in order: its body and what the tracker's key sees of its inputs."""
    return [(str(n.args[0].target) if isinstance(n.args[0], torch.fx.Node) else "", _metadata(n.args[2:]))
            for n in gm.graph.find_nodes(op="call_function", target=INVOKE_SUBGRAPH)]


def apart(calls: list[tuple[int, tuple[str, tuple]]], group: tuple[int, ...]) -> list[str]:
    """The bodies that identical calls (``group``, indices into ``calls``: (frame, call)) made in one frame
    with equal input metadata use, where they use more than one; else none."""
    parts: dict[tuple, set[str]] = defaultdict(set)
    for i in group:
        frame, (body, meta) = calls[i]
        parts[(frame, meta)].add(body)
    return next((sorted(bodies) for bodies in parts.values() if len(bodies) > 1), [])


def _refusals(log: list[str] | None) -> list[str]:
    """Why Dynamo refused its reuse cache in the frame, as it logs it ("not eligible -- ..."): a refused call
    falls back on the install-time comparison of the traced body with those installed (are_same_graph_modules)."""
    return sorted(set(said(log or [], REFUSED)))


def _check_compile_region(outcome: Outcome) -> Verdict:
    """Each call of a nested_compile_region block is already an invoke_subgraph
    node; identical calls (with identical input metadata) should share one subgraph
    (unless torch documents that it cannot: a body returning a Python value or a dict)."""
    kind = outcome.program.block.returns
    if _reuse_needs_tensor_outputs() and not _outputs_reusable(kind):
        return Verdict(NAME, Status.PASS, message=f"the block returns {RETURNS[kind].rule}: torch reuses a "
                       "nested_compile_region body only for tensor outputs (is_reuse_eligible), by design")
    calls: list[tuple[int, tuple[str, tuple]]] = []
    for frame, record in enumerate(outcome.capture.structure):
        if record.pre is None:
            return Verdict(NAME, Status.INCONCLUSIVE, kind="unmapped", message="graph not recorded")
        calls += [(frame, call) for call in subgraph_calls(record.pre)]
    program = outcome.program
    if len(calls) != len(program.repeats()):
        return Verdict(NAME, Status.INCONCLUSIVE, kind="unmapped",
                       message=f"{len(calls)} subgraph calls for {len(program.repeats())} repeats")
    for group in program.identical_repeats():
        subgraphs = apart(calls, tuple(group))
        if subgraphs:
            refused = _refusals(outcome.capture.reuse_log)
            # a refused call meets the install-time comparison alone: a cause of its own (KI-164's)
            return Verdict(NAME, Status.FAIL, kind="missed_merge", where=f"repeat{group}",
                           message=f"identical calls of a nested_compile_region use {len(subgraphs)} subgraphs: "
                                   f"{subgraphs}" + (f"; Dynamo refused its reuse cache: {refused}" if refused else ""),
                           details={"label": "compile_region:refused" if refused else "compile_region",
                                    "group": list(group), "subgraphs": subgraphs, "refused": refused})
    return Verdict(NAME, Status.PASS, message="identical nested_compile_region calls share subgraphs")


def _check_model(outcome: Outcome) -> Verdict:
    """A model's repeats are known only as layers alike in class, shapes and
    plain attributes (harness.model.repeated_layers), not as traced regions:
    the pass must have merged something where such layers exist and one
    graph holds them; how much it merged is not judged (a region may span
    a layer and a half, or part of one)."""
    repeats = outcome.repeats or {}
    if not repeats:
        return Verdict(NAME, Status.PASS, message="no repeated layers to merge")
    said = ", ".join(f"{path} ({n} alike)" for path, n in repeats.items())
    capture = outcome.capture
    if capture.invoke_subgraph_calls >= 2:
        return Verdict(NAME, Status.PASS, message=f"{capture.invoke_subgraph_calls} invoke_subgraph calls for {said}")
    if capture.frames != 1:
        return Verdict(NAME, Status.INCONCLUSIVE, kind="graph_breaks",
                       message=f"{capture.frames} graphs: graph breaks may split the repeats of {said}")
    return Verdict(NAME, Status.FAIL, kind="missed_merge", where="model",
                   message=f"one graph holds {said}, yet the pass merged nothing "
                           f"({capture.invoke_subgraph_calls} invoke_subgraph calls)",
                   details={"label": "missed:model_layers", "repeats": repeats})
