"""Door coverage: per door of ``generators.doors``, how many programs went
through it, how many of those reached ``invoke_subgraph`` through it, and
what the door oracle said (pass, fail, refused, ...), so a door that never
opens, or opens onto nothing, shows without reading code."""

from __future__ import annotations

from collections import Counter

from generators.doors import DOORS_LIST

OUTCOMES = ("pass", "fail", "refused", "inconclusive")
COLUMNS = ("programs", "invoke_subgraph", *OUTCOMES, "inductor")


def event(door: str, outcome: str, invoke_subgraph: int, backend: str) -> dict:
    """What a worker reports of one program's door run."""
    return {"name": door, "outcome": outcome, "invoke_subgraph": invoke_subgraph, "backend": backend}


def fold(into: dict[str, Counter], e: dict | None) -> None:
    if not e:
        return
    c = into.setdefault(e["name"], Counter())
    c["programs"] += 1
    c["invoke_subgraph"] += bool(e.get("invoke_subgraph"))
    c[e.get("outcome", "inconclusive")] += 1
    c["inductor"] += e.get("backend") == "inductor"


def rows(doors: dict) -> list[dict]:
    return [{"name": d.name, "family": d.family, "counts": [dict(doors.get(d.name, {})).get(c, 0) for c in COLUMNS]}
            for d in DOORS_LIST]


def never_opened(doors: dict) -> list[str]:
    return [d.name for d in DOORS_LIST if not dict(doors.get(d.name, {})).get("programs")]


def markdown(doors: dict) -> list[str]:
    head = ["## Door coverage: every way into the pipeline", "",
            "Programs reached through each door (generators/doors.py): how many, how many reached invoke_subgraph "
            "through it, the door oracle's verdicts, and how many ran on inductor. A row of zeros is a hole.", "",
            "| door | family | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    return head + [f"| `{r['name']}` | {r['family']} | {' | '.join(map(str, r['counts']))} |" for r in rows(doors)] + [""]


def text(doors: dict) -> list[str]:
    lines = ["\ndoor coverage (programs per door; " + ", ".join(COLUMNS) + ")"]
    for r in rows(doors):
        cells = " ".join(f"{n:>6}" for n in r["counts"])
        lines.append(f"  {r['name']:<28} {cells}{'   NEVER OPENED' if not r['counts'][0] else ''}")
    return lines
