"""Region identity: every region in a group is interchangeable with the first.

The pass builds one subgraph from a group's first region and calls it in
place of every other, so any difference between regions is a miscompilation
waiting for inputs that expose it. This oracle compares the harness's own
description of each region (``harness.structure.NodeDesc``), never the
tracker's hash: op targets in topological correspondence, constant arguments
by type and value, the metadata of external inputs and of each node's value,
and the global state each node was traced under. A data-dependent size is a
fresh unbacked symbol at every call of the op that makes it (u0 in one
region, u1 in the next), so regions are compared up to a one-to-one
renaming of those symbols.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from harness.outcome import Outcome
from harness.structure import NodeDesc

from .verdict import Status, Verdict

NAME = "region_identity"

# Ambient fields that change what an op computes; thread count does not.
IGNORED_AMBIENT = {"num_threads"}
UNBACKED = r"\bu\d+\b"  # an unbacked symbol: a data-dependent size, fresh at every call of the op making it


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


def _unbacked_pairs(x: Any, y: Any, pairs: list) -> None:
    """(ref's symbol, the region's) for each unbacked symbol where ``x`` and ``y`` agree but for those."""
    if isinstance(x, str) and isinstance(y, str):
        if re.sub(UNBACKED, "u", x) == re.sub(UNBACKED, "u", y):
            pairs.extend(zip(re.findall(UNBACKED, x), re.findall(UNBACKED, y)))
    elif isinstance(x, dict) and isinstance(y, dict):
        for key in sorted(x.keys() & y.keys()):
            _unbacked_pairs(x[key], y[key], pairs)
    elif isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and len(x) == len(y):
        for a, b in zip(x, y):
            _unbacked_pairs(a, b, pairs)


def _renamed(x: Any, names: dict) -> Any:
    if isinstance(x, str):
        return re.sub(UNBACKED, lambda m: names.get(m.group(0), m.group(0)), x)
    if isinstance(x, dict):
        return {k: _renamed(v, names) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_renamed(v, names) for v in x)
    return x


def _unbacked_renamed(ref: list, region: list) -> list:
    """``region``'s nodes with its unbacked symbols named as ``ref``'s where the two agree one to one (first
    sight decides; a symbol paired twice differently keeps its name, and the difference shows)."""
    pairs: list = []
    for a, b in zip(ref, region):
        _unbacked_pairs((a.args, a.value), (b.args, b.value), pairs)
    names: dict = {}
    for x, y in pairs:
        if y not in names and x not in names.values():
            names[y] = x
    return [type(b)(b.name, b.op, b.target, _renamed(b.args, names), _renamed(b.value, names), b.ambient)
            for b in region]


def _pair_differences(ref: list, region: list) -> list[tuple[str, str, Any, Any]]:
    """(label, description, node of ``ref``, node of ``region``) of each
    node pair of two regions of one size that differs, causes only: a
    result that differs because an argument made in the region does is a
    consequence. Regions repros embed it (reports.repro)."""
    out, differing = [], set()
    for i, (a, b) in enumerate(zip(ref, _unbacked_renamed(ref, region))):
        hit = _first_difference(a, b)
        if not hit:
            continue
        differing.add(i)
        if hit[0].startswith("value:") and any(x[0] == "node" and x[1] in differing for _, x in a.args):
            continue
        out.append((*hit, a, b))
    return out


def differences(outcome: Outcome) -> list[dict]:
    """Every distinct way the regions of a group differ from its first, each
    label once (its first occurrence): a known difference in a group must
    not hide a new one beside it (reports.triage reads them all)."""
    found: dict[str, dict] = {}
    for g_index, record in enumerate(outcome.capture.structure):
        for group_index, group in enumerate(record.groups):
            where, ref = f"graph[{g_index}].group[{group_index}]", group[0]
            for r_index, region in enumerate(group[1:], 1):
                if len(region) != len(ref):
                    found.setdefault("size", {"label": "size", "kind": "size", "where": where,
                                              "message": f"regions of {len(ref)} and {len(region)} nodes in one group"})
                    continue
                for label, what, a, b in _pair_differences(ref, region):
                    found.setdefault(label, {"label": label, "kind": label.split(":")[0], "where": where,
                                             "nodes": [a.name, b.name], "region": r_index,
                                             "message": f"{a.name} ({a.target}) in region 0 and {b.name} ({b.target}) "
                                                        f"in region {r_index} differ: {what}"})
    return list(found.values())


def check(outcome: Outcome) -> Verdict:
    found = differences(outcome)
    if found:
        first = found[0]
        return Verdict(NAME, Status.FAIL, kind=first["kind"], where=first["where"], message=first["message"],
                       details={**{k: v for k, v in first.items() if k not in ("kind", "where", "message")},
                                "differences": found})
    groups = sum(len(record.groups) for record in outcome.capture.structure)
    return Verdict(NAME, Status.PASS, message=f"{groups} region groups, every region identical")
