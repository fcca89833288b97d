"""The regression workflow: compare two campaigns, and promote a finding
into the known-issues baseline that ``suites/test_known_issues.py`` checks.

``diff`` tells what changed between two runs (two torch versions, two
backends, before and after a change to the pass): findings new in the second,
fixed since the first, and persisting, by signature.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from generators.ir import Program

from . import known_issues
from .ledger import Ledger


def campaign_summary(run: Path) -> dict:
    """A campaign folder's summary.json (rebuilt from its ledger where it was killed before its first report)."""
    path = run / "summary.json"
    if path.exists():
        return json.loads(path.read_text())
    if (run / "findings.jsonl").exists():  # a campaign killed before its first report
        return Ledger.load(run).summary()
    raise ValueError(f"{run}: not a campaign folder (no summary.json or findings.jsonl)")


def diff(run_a: Path, run_b: Path) -> tuple[str, dict]:
    """A Markdown report and its counts: new, fixed and persisting findings."""
    a, b = campaign_summary(run_a), campaign_summary(run_b)
    fa = {f["signature"]: f for f in a["findings"]}
    fb = {f["signature"]: f for f in b["findings"]}
    new = [fb[s] for s in sorted(fb) if s not in fa]
    fixed = [fa[s] for s in sorted(fa) if s not in fb]
    persisting = [(fa[s], fb[s]) for s in sorted(fa) if s in fb]

    def side(s: dict, run: Path) -> str:
        return (f"`{run}`: {s.get('backend')} on torch {s.get('torch')}, seed {s.get('seed')}, "
                f"{s.get('programs')} programs in {s.get('seconds')} s")

    lines = ["# Campaign diff", "", f"- A: {side(a, run_a)}", f"- B: {side(b, run_b)}", "",
             f"**{len(new)} new, {len(fixed)} fixed, {len(persisting)} persisting.**", ""]
    if a.get("programs") and b.get("programs") and abs(a["programs"] - b["programs"]) > max(a["programs"], b["programs"]) / 2:
        lines += ["Note: the runs drew very different numbers of programs; a finding hit rarely may be missing "
                  "from the shorter run without being fixed.", ""]
    lines += ["## New in B", "", "| signature | hits | known issue | repro |", "|---|---|---|---|"]
    lines += [f"| `{f['signature']}` | {f['count']} | {f.get('known_issue') or '**NEW**'} | `{run_b / f['folder']}/repro.py` |"
              for f in new] or ["| (none) | | | |"]
    lines += ["", "## Fixed in B (seen in A only)", "", "| signature | hits in A | known issue | repro (A) |", "|---|---|---|---|"]
    lines += [f"| `{f['signature']}` | {f['count']} | {f.get('known_issue') or ''} | `{run_a / f['folder']}/repro.py` |"
              for f in fixed] or ["| (none) | | | |"]
    lines += ["", "## Persisting", "", "| signature | hits A | hits B | known issue |", "|---|---|---|---|"]
    lines += [f"| `{fa_['signature']}` | {fa_['count']} | {fb_['count']} | {fb_.get('known_issue') or ''} |"
              for fa_, fb_ in persisting] or ["| (none) | | | |"]
    return "\n".join(lines) + "\n", {"new": len(new), "fixed": len(fixed), "persisting": len(persisting)}


def promote(folder: Path, issue_id: str, title: str, root: Path = known_issues.ROOT) -> Path:
    """Make a campaign finding a known issue: its program, signature, backend
    and repro driver become ``reports/known_issues/<id>-<title>/``."""
    meta_path, program_path = folder / "meta.json", folder / "program.json"
    if not meta_path.exists() or not program_path.exists():
        raise ValueError(f"{folder}: not a finding folder (needs meta.json and program.json)")
    if not re.fullmatch(r"KI-\d{3,}", issue_id):
        raise ValueError(f"issue id {issue_id!r}: expected KI-<number>, e.g. KI-019")
    if known_issues.by_id(issue_id, root) is not None:
        raise ValueError(f"{issue_id} already exists in {root}")
    meta = json.loads(meta_path.read_text())
    issue = {
        "id": issue_id, "title": title, "patterns": [meta["signature"]], "backend": meta["backend"],
        "description": meta.get("message", ""), "code": [],
        "repro": meta.get("driver") or "differential",
        "dedup": meta.get("config", {}).get("use_graph_deduplication", True),
    }
    if meta.get("variant"):
        issue["variant"] = meta["variant"]
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
    program = Program.from_json(program_path.read_text())
    return known_issues.record(f"{issue_id}-{slug}", issue, program, root)
