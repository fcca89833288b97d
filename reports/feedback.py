"""A steered campaign's books (``--feedback``, campaigns.steer): edges reached
over time, what each source of programs (plain draws, swarm draws, each
mutation operator) ran and reached, which swarm features paid, which files
the new edges lie in. Folded from the program events like the rest of the
ledger, so ``--resume`` and ``report merge`` keep them."""

from __future__ import annotations

from collections import Counter

from .schema import thin



def edge_file(edge: str) -> str:
    """The torch file an arc lies in (``torch/_dynamo/guards.py:12>14``), or
    the family of a semantic edge (``guard``, ``verdict``, ``counter``)."""
    head, sep, _ = edge.rpartition(":")
    if sep and head.endswith(".py"):
        return head
    return edge.split(":", 1)[0]


def new_state() -> dict:
    return {"sources": {}, "files": Counter(), "timeline": [], "edges": 0, "swarm": {}, "swarm_programs": 0,
            "swarm_kept": 0, "programs": 0}


def fold(state: dict, e: dict, started: float) -> None:
    origin = e.get("origin")
    if origin is None:
        return
    new = int(e.get("new_edges", 0))
    state["programs"] += 1
    state["edges"] += new
    arm = origin.get("arm", origin.get("source", "draw"))
    src = state["sources"].setdefault(arm, {"programs": 0, "new_edges": 0, "seconds": 0.0, "kept": 0})
    src["programs"] += 1
    src["new_edges"] += new
    src["seconds"] = round(src["seconds"] + float(e.get("seconds", 0.0)), 3)
    src["kept"] += bool(new)
    state["files"].update(e.get("new_by_file") or {})
    if "swarm_off" in origin:
        state["swarm_programs"] += 1
        state["swarm_kept"] += bool(new)
        for flag in [*origin.get("swarm_off", []), *(f"boost:{b}" for b in origin.get("swarm_on", []))]:
            c = state["swarm"].setdefault(flag, [0, 0, 0])
            c[0] += 1
            c[1] += new
            c[2] += bool(new)
    t = round(e.get("at", started) - started, 1)
    if state["timeline"] and state["timeline"][-1][0] == t:
        state["timeline"][-1] = (t, state["edges"])
    else:
        state["timeline"].append((t, state["edges"]))


def summary(state: dict) -> dict | None:
    """summary.json's ``feedback`` (None: the campaign was not steered)."""
    if not state["programs"]:
        return None
    # lift: the share of a flag's programs that reached something new, against all swarm programs'
    # (shares of programs, not sums of edges: the first programs of a campaign reach thousands each)
    per = state["swarm_kept"] / state["swarm_programs"] if state["swarm_programs"] else 0.0
    swarm = {flag: {"programs": n, "new_edges": e, "kept": k, "lift": round((k / n) / per, 2) if per else None}
             for flag, (n, e, k) in sorted(state["swarm"].items())}
    arcs = sum(n for f, n in state["files"].items() if f.endswith(".py"))
    return {"programs": state["programs"], "edges": state["edges"], "arcs": arcs,
            "semantic_edges": state["edges"] - arcs,
            "sources": {k: {**v, "edges_per_second": round(v["new_edges"] / v["seconds"], 3) if v["seconds"] else 0.0}
                        for k, v in sorted(state["sources"].items())},
            "files": dict(state["files"].most_common()),
            "swarm": swarm,
            "timeline": [{"t": t, "edges": n} for t, n in thin(state["timeline"])]}


def markdown(f: dict | None) -> list[str]:
    if not f:
        return []
    lines = ["## Feedback", "",
             f"{f['edges']} edges reached ({f['arcs']} arcs of the watched torch files, {f['semantic_edges']} of the "
             f"harness's own events) by {f['programs']} programs; corpus {f.get('corpus', '?')} programs"
             + (f"; corpus entries skipped: {f['corpus_skipped']}" if f.get("corpus_skipped") else "") + ".", "",
             "| source | programs | new edges | kept | edges per worker-second |", "|---|---|---|---|---|"]
    for name, s in sorted(f["sources"].items(), key=lambda kv: -kv[1]["new_edges"]):
        lines.append(f"| `{name}` | {s['programs']} | {s['new_edges']} | {s['kept']} | {s['edges_per_second']} |")
    lines.append("")
    if f.get("files"):
        lines += ["| where the new edges lie | edges |", "|---|---|"]
        lines += [f"| `{name}` | {n} |" for name, n in list(f["files"].items())[:15]]
        lines.append("")
    paid = sorted(((k, v) for k, v in f.get("swarm", {}).items() if v["lift"]), key=lambda kv: -kv[1]["lift"])
    if paid:
        lines += ["Swarm features whose absence (or boost) paid most: the share of their programs that reached "
                  "something new, against all swarm programs' (lift):", "",
                  "| feature off (or boost) | programs | reached something new | new edges | lift |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{k}` | {v['programs']} | {v['kept']} | {v['new_edges']} | {v['lift']} |" for k, v in paid[:10]]
        lines.append("")
    if f.get("timeline"):
        last = f["timeline"][-1]
        points = f["timeline"][::max(1, len(f["timeline"]) // 6)]
        lines += ["Edges over time: " + ", ".join(f"{p['edges']} at {p['t']:g} s" for p in points)
                  + f"; {last['edges']} at {last['t']:g} s.", ""]
    return lines


def rows(f: dict | None) -> dict | None:
    """What the HTML report's feedback section shows (None: not steered)."""
    if not f:
        return None
    paid = sorted(((k, v) for k, v in f.get("swarm", {}).items() if v["lift"]), key=lambda kv: -kv[1]["lift"])[:10]
    return {"line": f"{f['edges']} edges reached ({f['arcs']} arcs of the watched torch files, {f['semantic_edges']} "
                    f"of the harness's own events) by {f['programs']} programs; corpus {f.get('corpus', '?')} "
                    f"programs; corpus entries skipped: {f.get('corpus_skipped', 0)}",
            "sources": [(name, s["programs"], s["new_edges"], s["kept"], s["edges_per_second"])
                        for name, s in sorted(f["sources"].items(), key=lambda kv: -kv[1]["new_edges"])],
            "files": list(f.get("files", {}).items())[:15],
            "swarm": [(k, v["programs"], v["kept"], v["new_edges"], v["lift"]) for k, v in paid]}
