"""The page a PyTorch maintainer triages the baseline from (``report known-issues``).

Every recorded issue, ranked by how often default campaigns meet it (the
programs whose findings it names) and how much of the space it masks (the
judgments it kept from being made, ``reports.masked``), with its status, its
upstream links and the search that found them, the torch releases it was seen
on, and its short repro's length. The figures come from campaign folders given
on the command line, or from ``met.json`` in the baseline: the last measured
default campaigns, kept with the command that made them.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import date
from pathlib import Path

from . import known_issues
from .regression import campaign_summary
from .upstream import from_known, minimal_repro

MET = known_issues.ROOT / "met.json"


def measure(summaries: list[dict], command: str = "") -> dict:
    """What ``met.json`` keeps of campaigns' summaries: per issue, the programs whose findings name it and the
    judgments it masked; the programs and judgments in all."""
    met, masked = Counter(), Counter()
    programs = judgments = 0
    for s in summaries:
        programs += int(s.get("programs", 0))
        judgments += int((s.get("masked") or {}).get("judgments", 0))
        for f in s.get("findings", ()):
            known = f.get("known_issue") or _known_now(f.get("signature", ""), s.get("backend"))
            if known:
                met[known] += int(f.get("count", 1))
        for issue, v in ((s.get("masked") or {}).get("by_issue") or {}).items():
            masked[issue] += int(v.get("masked", 0))
    return {"command": command, "date": date.today().isoformat(),
            "torch": sorted({s.get("torch", "") for s in summaries}), "campaigns": len(summaries),
            "programs": programs, "judgments": judgments, "met": dict(met.most_common()),
            "masked": dict(masked.most_common())}


def measured(runs: list[Path], record: bool = False) -> dict:
    """The measure of the campaign folders ``runs``, kept as ``met.json`` with ``record``; none given: the one
    kept. ValueError where there is neither, or nothing to record."""
    if record and not runs:
        raise ValueError("--record keeps the measure of --runs: give the campaign folders")
    if not runs:
        if not MET.is_file():
            raise ValueError(f"no campaign folders given and no {MET} recorded: pass --runs RUN...")
        return json.loads(MET.read_text())
    taken = measure([campaign_summary(r) for r in runs], "dedup-harness report known-issues --runs " + " ".join(map(str, runs)))
    if record:
        MET.write_text(json.dumps(taken, indent=2) + "\n")
    return taken


def _known_now(signature: str, backend) -> str | None:
    """The recorded issue a finding is by today's baseline (one recorded since the campaign ran counts too)."""
    issue = known_issues.match(signature, backend) if signature else None
    return issue.id if issue else None


def rows(measured: dict) -> list[dict]:
    """One row per recorded issue, most met first, then most masked, then by id."""
    out = []
    for issue in known_issues.load():
        minimal = minimal_repro(from_known(issue, strict=False))
        met, masked = measured["met"].get(issue.id, 0), measured["masked"].get(issue.id, 0)
        out.append({
            "id": issue.id, "title": issue.title, "backend": issue.backend, "kind": "crash" if issue.crash else "wrong values",
            "met": met, "met_share": met / measured["programs"] if measured["programs"] else 0.0,
            "masked": masked, "masked_share": masked / measured["judgments"] if measured["judgments"] else 0.0,
            "status": issue.status, "upstream": list(issue.upstream), "verdict": issue.upstream_search[1],
            "query": issue.upstream_search[0], "torch_seen": list(issue.torch_seen),
            "releases": ", ".join(f"{r}: {status.split(':')[0]}" for r, status in issue.releases),
            "minimal": len(minimal.splitlines()) if minimal else None,
            "minimal_kind": "hand-cut" if issue.minimal else "rendered" if minimal else "",
        })
    return sorted(out, key=lambda r: (-r["met"], -r["masked"], r["id"]))


def duplicates(table: list[dict]) -> list[dict]:
    """The rows whose upstream search found the bug already reported or fixed."""
    return [r for r in table if r["verdict"].startswith(("duplicate of", "fixed by", "a case of"))]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _link(url: str) -> str:
    return f"[#{url.rstrip('/').rsplit('/', 1)[-1]}]({url})"


def markdown(table: list[dict], measured: dict) -> str:
    lines = ["# Known issues: what to triage first", "",
             f"{len(table)} recorded issues; {len(duplicates(table))} already known upstream. Ranked by how often "
             f"{measured['campaigns']} default campaigns ({measured['programs']} programs, torch "
             f"{', '.join(measured['torch']) or '?'}; `{measured['command'] or 'campaign folders given'}`, "
             f"{measured['date']}) met each, then by the share of their {measured['judgments']} judgments it masked.",
             "", "| issue | met | masked | kind | backend | status | releases | upstream | minimal repro | title |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        links = " ".join(_link(u) for u in r["upstream"]) or "unfiled"
        minimal = f"{r['minimal']} lines ({r['minimal_kind']})" if r["minimal"] else "strict repro only"
        lines.append(f"| {r['id']} | {r['met']} ({_pct(r['met_share'])}) | {r['masked']} ({_pct(r['masked_share'])}) | "
                     f"{r['kind']} | {r['backend']} | {r['status']} | {r['releases'] or '-'} | {links}<br>{r['verdict'][:140]} | {minimal} | "
                     f"{r['title'][:160].replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def write(out: Path, measured: dict) -> tuple[Path, Path]:
    from .html import render_known_issues_html

    table = rows(measured)
    out.mkdir(parents=True, exist_ok=True)
    (out / "known-issues.md").write_text(markdown(table, measured))
    (out / "known-issues.html").write_text(render_known_issues_html(table, measured, len(duplicates(table))))
    return out / "known-issues.md", out / "known-issues.html"
