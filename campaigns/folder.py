"""A campaign's folder: what it holds, how it is started afresh, the names
of its findings' folders, and the reports rendered into it from a summary.

Shared by a campaign and ``report merge``; no torch here, so a merge starts
at once.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from reports import door_coverage, feedback, guard_coverage, masked, op_coverage, semantic
from reports.html import render_html
from reports.junit import render_junit
from reports.known_issues import known_met
from reports.ledger import LOG, Ledger
from reports.schema import REPRO_EXITS, SEVERITIES, grouped, harness_errors_line, root_cause_line

from .corpus import FOLDER as CORPUS

ENV_FILE = "collect_env.txt"  # a campaign's, captured once (campaigns.upstream.EnvCapture)
# Files a campaign writes into its folder (cleared when a new campaign starts there).
CAPABILITIES = "capabilities.json"  # what the backend can do, as the probe found (harness.backend_capabilities)
OUTPUTS = (LOG, "campaign.json", "summary.json", "report.md", "report.html", "junit.xml", "findings", "workers",
           "coverage", ENV_FILE, CORPUS, CAPABILITIES)


def slug(signature: str) -> str:
    """A folder name per signature: readable, and unique though two long
    signatures share their first 64 characters (KeyError: vN vs KeyError: vN_N)."""
    digest = hashlib.sha1(signature.encode()).hexdigest()[:8]
    return f'{re.sub(r"[^A-Za-z0-9]+", "-", signature).strip("-")[:64]}-{digest}'


def prepare(out: Path, resume: bool) -> Ledger:
    """A fresh folder (earlier campaign outputs removed) or, resuming, the
    folded log of the campaign already there."""
    out.mkdir(parents=True, exist_ok=True)
    if resume:
        if not (out / LOG).exists():
            raise ValueError(f"--resume: no campaign in {out} (no {LOG})")
        return Ledger.load(out)
    for name in OUTPUTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return Ledger()


def write_reports(out: Path, s: dict) -> None:
    (out / "summary.json").write_text(json.dumps(s, indent=2, default=str))
    (out / "report.md").write_text(markdown(s))
    (out / "report.html").write_text(render_html(s, out))
    (out / "junit.xml").write_text(render_junit(s))


def backend_lines(s: dict) -> list[str]:
    """What the backend could not be checked for, how it was run and compared (harness.backend_capabilities)."""
    lines = []
    if s.get("backend_unavailable"):
        lines += [f"Unavailable with backend {s['backend']}: "
                  + "; ".join(f"{k} ({v})" for k, v in s["backend_unavailable"].items()), ""]
    if s.get("mode") and s["mode"] != "train" or s.get("backend_notes"):
        lines += [f"Mode: {s.get('mode', 'train')}; " + "; ".join(s.get("backend_notes") or [])
                  + (f"; programs not run, by why: {s['unfit']}" if s.get("unfit") else ""), ""]
    return lines


def _written(f: dict) -> str:
    """A finding's call differences, then the spellings its program writes ops in."""
    return ", ".join([*(f.get("differences") or []), *(f"spelled {w}" for w in f.get("spellings") or [])]) or "-"


def markdown(s: dict) -> str:
    lines = [
        f"# Fuzz campaign: {s['backend']} on torch {s['torch']}", "", f"**{root_cause_line(s)}**", "",
        f"{s['programs']} programs in {s['seconds']} s ({s['programs_per_second']}/s, {s.get('workers')} workers, "
        f"shard {s.get('shard')}); {s['deduplicated_share']:.0%} produced invoke_subgraph regions. "
        f"Verdicts: {s['verdicts']}. Workers lost: {s.get('workers_lost') or 'none'}.", "",
        f"Seconds per program by stage: {s.get('seconds_per_program', {})}.", "",
    ]
    if s.get("allocation"):  # how the workers were sized (campaigns.allocation)
        lines += [f"Workers sized to the allocation: {s.get('workers')} x {s.get('memory_mb') or 0:.0f} MB; "
                  + "; ".join(f"{k}: {v}" for k, v in s["allocation"].items())
                  + (f"; one GPU per worker of {', '.join(s['gpus'])}" if len(s.get("gpus") or ()) > 1 else "") + ".", ""]
    split = s.get("harness_seconds") or {}
    if split.get("run", {}).get("per_task"):
        per = split["run"]["per_task"]
        others = ", ".join(f"{k} {v['seconds']} s ({v['tasks']})" for k, v in split.items() if k not in ("run", "idle"))
        lines += [f"Workers' seconds per program: torch {per['torch']} s, harness {per['harness']} s; "
                  f"follow-up tasks: {others or 'none'}; idle: {split.get('idle', 0)} s. Finding hits triaged: "
                  f"{s.get('triage') or {}}; distinct findings followed up: {s.get('follow_ups') or {}}.", ""]
    if s.get("aborted"):
        lines += [f"**Stopped early:** {s['aborted']}", ""]
    errors = harness_errors_line(s)
    if errors:
        lines += [f"**{errors}**", ""]
    if s.get("unavailable"):
        lines += [f"Unavailable on torch {s['torch']}: " + "; ".join(f"{k} ({v})" for k, v in s["unavailable"].items()), ""]
    lines += backend_lines(s)
    for _, title, rows in grouped(s["findings"], SEVERITIES):
        lines += [f"## {title}", "", "| signature | hits | known issue | first failing layer | minimized | repro | "
                  "call differences, spellings |", "|---|---|---|---|---|---|---|"]
        for f in rows:
            code = f.get("repro_exit")
            exit_note = "" if code is None else f" (exits {code}: {REPRO_EXITS.get(code, 'error')})"
            lines.append(f"| `{f['signature']}` | {f['count']} | {f['known_issue'] or '**NEW**'} | "
                         f"{f.get('layer') or ''} | {'yes' if f.get('minimized') else 'no'} | "
                         f"`{f['folder']}/repro.py`{exit_note} | {_written(f)} |")
        if not rows:
            lines.append("| (none) | | | | | | |")
        lines.append("")
    met = known_met(s["findings"])
    if met:
        lines += ["## Known issues met", "", "| issue | status | upstream | title |", "|---|---|---|---|"]
        lines += [f"| {k['id']} | {k['status']} | {' '.join(k['upstream']) or 'unfiled'} | {k['title']} |" for k in met]
        lines.append("")
    lines += masked.markdown(s.get("masked"))
    lines += guard_coverage.markdown(s.get("guard_kinds"))
    lines += op_coverage.markdown(s.get("op_coverage"))
    lines += semantic.markdown(s.get("semantic_coverage") or {})
    if s.get("door_coverage") is not None:
        lines += door_coverage.markdown(s["door_coverage"])
    lines += feedback.markdown(s.get("feedback"))
    if s.get("coverage"):
        lines += ["## Coverage of the code under test", "", "| file | lines | branches | never reached |", "|---|---|---|---|"]
        for path, c in s["coverage"].items():
            lines.append(f"| `{path}` | {c['lines']}% | {c['branches']}% | {c['missing']} |")
        lines.append("")
    if s.get("cudagraphs"):
        lines += ["## CUDA graphs", "", "Replay runs by whether CUDA graphs engaged (a skip with PyTorch's reason):", "",
                  "| runs | engaged, or why not |", "|---|---|"]
        lines += [f"| {n} | {what} |" for what, n in s["cudagraphs"].items()]
        lines.append("")
    return "\n".join(lines)
