"""What a run did, in the harness's own words, as feedback edges: which guard
kinds Dynamo built and on what shape of source, which changed calls were
served by the first entry and which recompiled (and why), what the region
tracker grouped, how many graphs and breaks. These name behaviour the arcs
of one file cannot (a guard kind built for the first time on a dataclass
field is one arc in a table-driven builder), so the campaign keeps a program
that reached a new one like one that reached a new branch."""

from __future__ import annotations

import re

from .outcome import Capture, Outcome

_ACCESS = re.compile(r"\[[^\]]*\]|\.[A-Za-z_]\w*|\([^)]*\)")


def bucket(n: int) -> str:
    """0, 1, 2, 3-4, 5-8, ...: counts that differ only in size are one edge."""
    if n <= 2:
        return str(n)
    k = (n - 1).bit_length()
    return f"{2 ** (k - 1) + 1}-{2 ** k}"


def source_shape(name: str) -> str:
    """A guard's source with names taken out: ``L['self']._modules['b'].w``
    -> ``L[].[].``; what kind of object the guard reaches, not which."""
    root = name.split("[", 1)[0].split(".", 1)[0].split("(", 1)[0]
    rest = name[len(root):]
    return root + "".join("[]" if m.startswith("[") else "()" if m.startswith("(") else "."
                          for m in _ACCESS.findall(rest))[:24]


def _reason(text: str) -> str:
    """A guard-failure or recompile reason with its values taken out."""
    text = re.sub(r"\d+(\.\d+)?", "N", text.splitlines()[0] if text else "")
    return re.sub(r"'[^']*'", "S", text)[:60]


def _guards(prefix: str, guards: list[str]) -> set[str]:
    out = set()
    for g in guards:
        kind, _, name = g.partition(" ")
        out |= {f"{prefix}:{kind}", f"{prefix}:{kind}:{source_shape(name)}"}
    return out


def capture_edges(capture: Capture) -> set[str]:
    out = _guards("guard", capture.guards) | _guards("late_guard", capture.late_guards)
    out.add(f"frames:{bucket(capture.frames)}")
    out.add(f"graph_breaks:{bucket(capture.graph_breaks)}")
    out.add(f"invoke_subgraph:{bucket(capture.invoke_subgraph_calls)}")
    out.add(f"late_compiles:{bucket(capture.late_compiles)}")
    if capture.late_invoke_subgraph_calls:
        out.add("late_invoke_subgraph")
    if capture.late_symbolic:
        out.add("late_symbolic")
    if capture.original_accepts_original is False:
        out.add("reuse:rejects_itself")
    out |= {f"reject:{_reason(r)}" for r in capture.original_rejects_because}
    groups = capture.region_groups
    out.add(f"region_groups:{bucket(len(groups))}")
    for group in groups:
        out.add(f"group_size:{bucket(len(group))}")
        out |= {f"region_nodes:{bucket(len(region))}" for region in group[:1]}
    for run in capture.variants:
        kind = run.variant.get("kind", "?")
        if run.skipped or run.invalid:
            continue
        served = "recompiled" if run.recompiled else "served" if run.served_by_original else "other_entry"
        out.add(f"variant:{kind}:{served}")
        if run.grouped:
            out.add(f"variant:{kind}:grouped")
        if run.symbolic:
            out.add(f"variant:{kind}:symbolic")
        out |= {f"recompile:{_reason(r)}" for r in run.recompile_reasons}
        out |= _guards(f"variant_guard:{kind.split(':')[0]}", run.new_guards)
        if run.compiled is not None and run.compiled.failure is not None:
            out.add(f"variant_failure:{kind}:{run.compiled.failure.stage}:{run.compiled.failure.type}")
    return out


def outcome_edges(outcome: Outcome) -> set[str]:
    """A program run's edges: its capture's, its failures' and its companions'."""
    out = capture_edges(outcome.capture)
    failure = outcome.compiled.failure
    if failure is not None:
        out.add(f"failure:{failure.stage}:{failure.type}")
    for name, (execution, _) in outcome.companions.items():
        if execution.failure is not None:
            out.add(f"companion_failure:{name}:{execution.failure.stage}:{execution.failure.type}")
    return out
