"""Op coverage as a figure: the sweep's op x spelling x dtype table per backend
(``campaigns.op_sweep``), for the Markdown and HTML reports, ``stats`` and
``report merge``.

A table is what ``Sweep.table`` writes into ``summary.json`` under
``op_coverage``: per backend, the cells with their status (``STATUSES``) and
reason (the finding's signature, the known issue, the capability probe's or
the backend's reason, OpInfo's own record). Nothing here imports torch.
"""

from __future__ import annotations

from collections import Counter

# Most telling first: what a merge keeps when two shards judged a cell apart.
STATUSES = ("failed", "known", "unsupported", "invalid", "expected", "inconclusive", "passed", "untried")
EXERCISED = ("passed", "failed", "known", "inconclusive", "expected")
KINDS = ("torch", "functional", "method", "operator", "aten", "inplace", "out")
DTYPES = ("float32", "float64", "bfloat16", "float16", "int64", "bool")
LETTER = {"passed": "P", "failed": "F", "known": "K", "unsupported": "U", "invalid": "I", "expected": "X",
          "inconclusive": "?", "untried": "."}


def _split(cell: str) -> tuple[str, str, str]:
    op, kind, dtype = cell.split("|")
    return op, kind, dtype


def counts(table: dict) -> dict[str, int]:
    c = Counter(e["status"] for e in table.get("by_cell", {}).values())
    return {s: c.get(s, 0) for s in STATUSES}


def merge(tables: list[dict]) -> dict:
    """Shards' tables of one backend as one: a cell's most telling status wins."""
    cells: dict[str, dict] = {}
    for t in tables:
        for cell, entry in t.get("by_cell", {}).items():
            old = cells.get(cell)
            if old is None or STATUSES.index(entry["status"]) < STATUSES.index(old["status"]):
                cells[cell] = entry
    merged = {"cells": len(cells), "batches": sum(t.get("batches", 0) for t in tables),
              "seconds": round(sum(t.get("seconds", 0.0) for t in tables), 1),
              "done": all(t.get("done") for t in tables), "by_cell": cells,
              "combinations": [c for t in tables for c in t.get("combinations", [])]}
    merged["counts"] = counts(merged)
    merged["exercised"] = sum(merged["counts"][s] for s in EXERCISED)
    return merged


def merge_all(coverages: list[dict]) -> dict:
    """``op_coverage`` of several summaries (backend -> table), merged per backend."""
    by_backend: dict[str, list[dict]] = {}
    for cov in coverages:
        for backend, table in (cov or {}).items():
            by_backend.setdefault(backend, []).append(table)
    return {b: merge(ts) for b, ts in by_backend.items()}


def columns(table: dict) -> list[tuple[str, str]]:
    """The (spelling, dtype) columns the table has, in KINDS x DTYPES order."""
    present = {_split(c)[1:] for c in table.get("by_cell", {})}
    return [(k, d) for k in KINDS for d in DTYPES if (k, d) in present]


def by_column(table: dict) -> list[dict]:
    """Per (spelling, dtype): how many cells have each status."""
    c: dict[tuple[str, str], Counter] = {}
    for cell, e in table.get("by_cell", {}).items():
        c.setdefault(_split(cell)[1:], Counter())[e["status"]] += 1
    return [{"kind": k, "dtype": d, **{s: c[(k, d)].get(s, 0) for s in STATUSES}} for k, d in columns(table)]


def failing(table: dict) -> list[dict]:
    """The cells that failed or met a known issue, or that the backend does not support, with why."""
    return [{"cell": cell, "status": e["status"], "reason": e.get("reason", "")}
            for cell, e in sorted(table.get("by_cell", {}).items())
            if e["status"] in ("failed", "known", "unsupported", "invalid")]


def heat_rows(table: dict) -> list[dict]:
    """One row per op: its cells' status letters in ``columns`` order (the HTML heat map)."""
    cols = columns(table)
    ops: dict[str, dict] = {}
    for cell, e in table.get("by_cell", {}).items():
        op, kind, dtype = _split(cell)
        ops.setdefault(op, {})[(kind, dtype)] = e
    rows = []
    for op in sorted(ops):
        cells = []
        for col in cols:
            e = ops[op].get(col)
            status = e["status"] if e else ""
            cells.append({"s": status, "l": LETTER.get(status, ""),
                          "t": e.get("reason", "") if e and status not in ("passed", "untried") else ""})
        rows.append({"op": op, "cells": cells})
    return rows


def markdown(coverage: dict | None) -> list[str]:
    if not coverage:
        return []
    lines = ["## Op coverage (the OpInfo sweep)", ""]
    for backend, table in coverage.items():
        n = counts(table)
        exercised = sum(n[s] for s in EXERCISED)
        lines += [f"**{backend}**: {table.get('cells', 0)} cells (op x spelling x dtype); exercised {exercised} "
                  f"(passed {n['passed']}, failed {n['failed']}, known issues {n['known']}, OpInfo's own "
                  f"expected failures {n['expected']}, inconclusive {n['inconclusive']}); unsupported by the backend "
                  f"{n['unsupported']}; invalid {n['invalid']}; untried {n['untried']}. "
                  f"{table.get('batches', 0)} batches, {table.get('seconds', 0)} worker seconds"
                  f"{'; the sweep is done' if table.get('done') else ''}.", "",
                  "| spelling | dtype | " + " | ".join(STATUSES) + " |", "|---|---|" + "---:|" * len(STATUSES)]
        lines += [f"| {r['kind']} | {r['dtype']} | " + " | ".join(str(r[s]) for s in STATUSES) + " |"
                  for r in by_column(table)]
        bad = failing(table)
        if bad:
            lines += ["", "| cell | status | why |", "|---|---|---|"]
            lines += [f"| `{b['cell']}` | {b['status']} | {b['reason'][:160]} |" for b in bad[:200]]
            if len(bad) > 200:
                lines.append(f"| ... | | {len(bad) - 200} more in summary.json |")
        together = table.get("combinations", [])
        if together:  # failures of cases together, each of which passed alone (campaigns.op_sweep)
            lines += ["", "Failing only together (a batch whose halves each passed, run whole):", ""]
            lines += [f"- {', '.join(c['findings']) or 'passed whole'}: " + ", ".join(f"`{x}`" for x in c["cells"][:12])
                      + (f" and {len(c['cells']) - 12} more" if len(c["cells"]) > 12 else "") for c in together]
        lines.append("")
    return lines


def text(coverage: dict | None) -> list[str]:
    """One line per backend (``stats``, a merge's console summary)."""
    return [f"op coverage on {b}: " + ", ".join(f"{s} {v}" for s, v in counts(t).items() if v) + f" of {t.get('cells', 0)} cells"
            for b, t in (coverage or {}).items()]
