"""Semantic coverage: per entry of the call-difference catalogue
(``generators.differences``), how many drawn calls showed it where torch
decides reuse (a nested_compile_region body, a deduplicated region, a
compiled call after a change) and with which ground truth, so a hole in the
program space shows without reading code."""

from __future__ import annotations

from collections import Counter

from generators.differences import DIFFERENCES, OUTCOMES, WHERE

COLUMNS = tuple(f"{w}:{o}" for w in WHERE for o in OUTCOMES if not (w == "calls" and o == "same"))


def fold(into: dict[str, Counter], counts: dict[str, dict[str, int]]) -> None:
    for name, cols in counts.items():
        into.setdefault(name, Counter()).update(cols)


def never_drawn(semantic: dict) -> list[str]:
    return [d.name for d in DIFFERENCES if not sum(dict(semantic.get(d.name, {})).values())]


def rows(semantic: dict) -> list[dict]:
    """One row per catalogue entry: name, family, truth and the counts of COLUMNS."""
    return [{"name": d.name, "family": d.family, "truth": d.truth,
             "counts": [dict(semantic.get(d.name, {})).get(c, 0) for c in COLUMNS]} for d in DIFFERENCES]


def markdown(semantic: dict) -> list[str]:
    """The coverage table: one row per catalogue entry, zeros included."""
    head = ["## Semantic coverage: every way two calls differ", "",
            "Calls showing each catalogue entry (generators/differences.py), by where torch decides reuse and by the "
            "ground truth against the first call (same function, or different). A row of zeros is a hole.", "",
            "| entry | family | Python's truth | " + " | ".join(COLUMNS) + " |",
            "|---|---|---|" + "---|" * len(COLUMNS)]
    lines = [f"| `{r['name']}`{' **never drawn**' if not sum(r['counts']) else ''} | {r['family']} | {r['truth']} | "
             f"{' | '.join(map(str, r['counts']))} |" for r in rows(semantic)]
    return head + lines + [""]


def text(semantic: dict) -> list[str]:
    """The same table for a terminal."""
    lines = ["\nsemantic coverage (calls per catalogue entry; " + ", ".join(COLUMNS) + ")"]
    for r in rows(semantic):
        cells = " ".join(f"{n:>6}" for n in r["counts"])
        lines.append(f"  {r['name']:<30} {r['truth']:<9} {cells}{'   NEVER DRAWN' if not sum(r['counts']) else ''}")
    return lines
