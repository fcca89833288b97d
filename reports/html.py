"""The harness's report pages (a campaign, a model check, a regression across torches), each one self-contained HTML file.

A page must open anywhere its folder is copied to (a CI artifact, a laptop
without network), so everything is inline: CSS, SVG plots and a small filter
script; the only links are relative ones into the campaign's own
``findings/`` folders. The markup lives in Jinja templates (``templates/``)
with autoescape on: signatures, messages and logs carry ``<``, ``&`` and
quotes from compiler errors, and only the template engine may decide what
becomes markup. This module gathers the plain data those templates show.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Optional

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from reports import door_coverage, feedback, op_coverage, semantic
from reports.known_issues import known_met
from reports.schema import REPRO_EXITS, SEVERITIES, confirmed, grouped, harness_errors_line, root_cause_line

LOG_TAIL = 60

_TEMPLATES = Environment(
    loader=PackageLoader("reports", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True, lstrip_blocks=True,
    finalize=lambda value: "" if value is None else value,  # a missing field shows as nothing, not "None"
)


def _page(template: str, **context: Any) -> str:
    return _TEMPLATES.get_template(template).render(**context)


def render_html(summary: dict, out: Path) -> str:
    """The report page for ``summary`` (see ``reports.schema``); finding folders are read under ``out``."""
    out = Path(out)
    s = summary
    findings = list(s.get("findings") or [])
    share = s.get("deduplicated_share")
    timeline = s.get("timeline") or []
    generator = sorted((s.get("generator") or {}).items(), key=lambda kv: (kv[1], kv[0]))  # rarest first
    return _page(
        "campaign.html.j2",
        title=f"Fuzz campaign: {s.get('backend', '?')} on torch {s.get('torch', '?')}",
        root_causes=root_cause_line(s), torch=s.get("torch"),
        unavailable=list((s.get("unavailable") or {}).items()), aborted=s.get("aborted"),
        harness_errors=harness_errors_line(s),
        fields=[
            ("backend", s.get("backend")), ("torch", s.get("torch")), ("python", s.get("python")),
            ("seed", s.get("seed")), ("shard", s.get("shard")), ("workers", s.get("workers")),
            ("oracles", ", ".join(s.get("oracles") or []) or None),
            ("programs", s.get("programs")), ("seconds", s.get("seconds")),
            ("programs/s", s.get("programs_per_second")),
            ("deduplicated share", f"{share:.1%}" if isinstance(share, (int, float)) else share),
        ],
        per_stage=list((s.get("seconds_per_program") or {}).items()),
        verdicts=sorted((s.get("verdicts") or {}).items()),
        by_severity=sorted((s.get("findings_by_severity") or {}).items()),
        workers_lost=sorted((s.get("workers_lost") or {}).items()),
        head=("signature", "hits", "known issue", "culprit", "first failing layer", "minimized", "repro exit", ""),
        groups=[{"severity": severity, "title": title, "rows": [_summary_row(f) for f in rows]}
                for severity, title, rows in grouped(findings, _severity_order(findings))],
        charts=_plots(timeline) + _edge_plot(s.get("feedback")),
        feedback=feedback.rows(s.get("feedback")),
        coverage=_coverage(s.get("coverage") or {}),
        semantic=semantic.rows(s.get("semantic_coverage") or {}) if s.get("semantic_coverage") is not None else [],
        semantic_columns=semantic.COLUMNS,
        doors=door_coverage.rows(s["door_coverage"]) if s.get("door_coverage") is not None else [],
        door_columns=door_coverage.COLUMNS,
        cudagraphs=list((s.get("cudagraphs") or {}).items()),
        masked=s.get("masked"),
        guard_kinds=s.get("guard_kinds") if (s.get("guard_kinds") or {}).get("built") else None,
        op_coverage=[{"backend": b, "counts": op_coverage.counts(t), "columns": op_coverage.columns(t),
                      "by_column": op_coverage.by_column(t), "rows": op_coverage.heat_rows(t),
                      "failing": op_coverage.failing(t), "cells": t.get("cells", 0), "done": t.get("done")}
                     for b, t in (s.get("op_coverage") or {}).items()],
        op_statuses=op_coverage.STATUSES,
        features=generator, never_drawn=sum(1 for _, v in generator if not v),
        sections=[_finding_section(f, out) for f in _ordered(findings)],
        known_met=known_met(findings),
    )


def section_id(signature: str) -> str:
    """An HTML id for a finding: readable slug plus a hash, so two signatures differing only in punctuation stay apart."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", signature).strip("-")[:60]
    return f"f-{slug}-{hashlib.sha1(signature.encode()).hexdigest()[:8]}"


def _severity_order(findings: Iterable[dict]) -> list[str]:
    extra = sorted({f.get("severity") or "wrong" for f in findings} - set(SEVERITIES))
    return [*SEVERITIES, *extra]


def _ordered(findings: list[dict]) -> list[dict]:
    order = {s: i for i, s in enumerate(_severity_order(findings))}
    # stable: keeps most hits first; the unconfirmed last, as in the table
    return sorted(findings, key=lambda f: (not confirmed(f), order[f.get("severity") or "wrong"]))


def _summary_row(f: dict) -> dict:
    minimized, code = f.get("minimized"), f.get("repro_exit")
    return {"signature": f.get("signature"), "hits": f.get("count", 0), "known_issue": f.get("known_issue"),
            "culprit": f.get("culprit"), "layer": f.get("layer"),
            "minimized": "yes" if minimized else "no" if minimized is not None else "?",
            "repro": None if code is None else {"code": code, "meaning": REPRO_EXITS.get(code, "error")},
            "anchor": section_id(str(f.get("signature")))}


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _finding_section(f: dict, out: Path, files: tuple[str, ...] = ("repro.py", "log.txt", "meta.json", "program.json")) -> dict:
    """A finding in detail: its fields joined with its meta.json's, which of its files exist, its repro and log tail."""
    sig = str(f.get("signature"))
    folder_name = f.get("folder") or "(no folder recorded)"
    folder = out / folder_name
    meta = {k: v for k, v in f.items() if k not in ("signature", "message")}
    meta_text = _read(folder / "meta.json")
    problem = None
    if meta_text is None:
        problem = "missing"
    else:
        try:  # fields only meta.json has (backend, config) join the finding's own
            meta.update({k: v for k, v in json.loads(meta_text).items() if k not in f and k != "message"})
        except (ValueError, AttributeError):
            problem = "not-object"
    log = _read(folder / "log.txt")
    tail = None
    if log is not None:
        lines = log.splitlines()
        shown = lines[-LOG_TAIL:]
        tail = {"shown": len(shown), "total": len(lines), "text": "\n".join(shown)}
    return {"id": section_id(sig), "signature": f.get("signature"), "known_issue": f.get("known_issue"),
            "message": f.get("message"), "folder": folder_name, "meta_problem": problem,
            "meta": [(k, json.dumps(v, default=str) if isinstance(v, (dict, list)) else v) for k, v in meta.items()],
            "files": [{"name": n, "present": (folder / n).is_file()} for n in files],
            "repro": _read(folder / "repro.py"), "log": tail}


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 times a power of ten)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(int(math.ceil((hi - first) / step)) + 1)]


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.3g}"


def line_chart(plot_id: str, title: str, xs: list[float], series: list[tuple[str, list[float], str]],
               xlabel: str, ylabel: str) -> dict:
    """The geometry of an SVG line chart (one polyline per series), in pixels ready to print."""
    w, h, left, right, top, bottom = 540, 300, 60, 15, 30, 45
    chart: dict[str, Any] = {"id": plot_id, "title": title, "width": w, "height": h, "empty": not xs}
    if not xs:
        return chart
    xt = _nice_ticks(min(0.0, min(xs)), max(xs))
    yt = _nice_ticks(0.0, max([max(ys) for _, ys, _ in series if ys] + [0.0]))
    sx = lambda x: f"{left + (x - xt[0]) / (xt[-1] - xt[0]) * (w - left - right):.1f}"  # noqa: E731
    sy = lambda y: h - bottom - (y - yt[0]) / (yt[-1] - yt[0]) * (h - top - bottom)  # noqa: E731
    chart.update(
        mid_x=w / 2, left=left, right=w - right, top=top, bottom=h - bottom, tick_end=h - bottom + 4,
        tick_label=h - bottom + 16,
        xticks=[{"x": sx(x), "label": _fmt(x)} for x in xt],
        yticks=[{"y": f"{sy(y):.1f}", "label_x": left - 6, "label_y": f"{sy(y) + 4:.1f}", "label": _fmt(y)} for y in yt],
        xlabel=xlabel, xlabel_x=(left + w - right) / 2, xlabel_y=h - 8, ylabel=ylabel, ylabel_y=(top + h - bottom) / 2,
        series=[{"label": label, "color": color, "points": " ".join(f"{sx(x)},{sy(y):.1f}" for x, y in zip(xs, ys)),
                 "dots": [(sx(x), f"{sy(y):.1f}") for x, y in zip(xs, ys)],
                 "key_x": left + 10, "key_y": top + 4 + 16 * i, "key_text_x": left + 25, "key_text_y": top + 13 + 16 * i}
                for i, (label, ys, color) in enumerate(series)],
    )
    return chart


def throughput(timeline: list[dict], window: float = 30.0) -> list[float]:
    """Programs per second over the last ``window`` seconds at each point (from
    the start while younger): programs finish in bursts, so a rate per
    interval between events would be noise."""
    rates = []
    for i, point in enumerate(timeline):
        t, p = float(point.get("t", 0)), float(point.get("programs", 0))
        j = i
        while j > 0 and t - float(timeline[j - 1].get("t", 0)) <= window:
            j -= 1
        t0, p0 = (float(timeline[j - 1].get("t", 0)), float(timeline[j - 1].get("programs", 0))) if j else (0.0, 0.0)
        rates.append((p - p0) / (t - t0) if t > t0 else (rates[-1] if rates else 0.0))
    return rates


def _plots(timeline: list[dict]) -> list[dict]:
    xs = [float(p.get("t", 0)) for p in timeline]
    return [line_chart("plot-findings", "Failures and distinct findings over time", xs,
                       [("failures", [float(p.get("failures", 0)) for p in timeline], "#c62828"),
                        ("distinct findings", [float(p.get("distinct", 0)) for p in timeline], "#1565c0")],
                       "seconds since start", "count"),
            line_chart("plot-throughput", "Throughput over time", xs,
                       [("programs/s (last 30 s)", throughput(timeline), "#2e7d32")], "seconds since start",
                       "programs per second")]


def _edge_plot(f: Optional[dict]) -> list[dict]:
    """Edges reached over time, in a steered (or edge-counting) campaign."""
    points = (f or {}).get("timeline") or []
    if not points:
        return []
    return [line_chart("plot-edges", "Feedback edges reached over time", [float(p["t"]) for p in points],
                       [("edges", [float(p["edges"]) for p in points], "#6a1b9a")], "seconds since start", "edges")]


def _ranges(missing: Any) -> str:
    """Missing lines as "3-5, 9"; a string is taken as already formatted."""
    if isinstance(missing, str):
        return missing
    nums = sorted({int(n) for n in missing or [] if isinstance(n, (int, float))})
    spans: list[list[int]] = []
    for n in nums:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def _pct(v: Any) -> Any:
    return "—" if v is None else f"{v:.1f}%" if isinstance(v, (int, float)) else v


def _coverage(coverage: dict) -> list[dict]:
    rows = []
    for name, c in sorted(coverage.items()):
        c = c if isinstance(c, dict) else {}
        missing = _ranges(c.get("missing"))
        rows.append({"file": name, "lines": _pct(c.get("lines")), "branches": _pct(c.get("branches")),
                     "missing": missing, "ranges": missing.count(",") + 1,
                     "missing_lines": len(c["missing"]) if isinstance(c.get("missing"), list) else None})
    return rows


def render_check_html(summary: dict, out: Path) -> str:
    """The page of a model check (``campaigns.check``): the model's verdicts,
    its changed calls with their times, and each finding as a campaign's."""
    out = Path(out)
    s = summary
    findings = list(s.get("findings") or [])
    return _page(
        "check.html.j2",
        title=f"Model check: {s.get('model', '?')} on {s.get('backend', '?')}, torch {s.get('torch', '?')}",
        fields=[("model", s.get("model")), ("backend", s.get("backend")), ("torch", s.get("torch")),
                ("seconds", s.get("seconds")), ("invoke_subgraph calls", s.get("invoke_subgraph_calls")),
                ("graphs", s.get("frames")), ("region groups", s.get("region_groups"))],
        stages=list((s.get("seconds_by_stage") or {}).items()),
        verdicts=[{"oracle": name, "status": v.get("status"), "kind": v.get("kind"), "message": v.get("message")}
                  for name, v in (s.get("verdicts") or {}).items()],
        changes=[{"kind": c.get("kind"), "description": c.get("description"),
                  "call": c.get("invalid") or ("recompiled" if c.get("recompiled") else "served by the first entry"),
                  "verdict": c.get("verdict", "—"), "message": c.get("message", ""), "seconds": c.get("seconds")}
                 for c in s.get("changes") or []],
        findings=[{"signature": f.get("signature"), "known_issue": f.get("known_issue"), "culprit": f.get("culprit"),
                   "anchor": section_id(str(f.get("signature")))} for f in findings],
        sections=[_finding_section(f, out, ("repro.py", "log.txt", "meta.json")) for f in findings],
    )


def render_regress_html(report: dict, meanings: dict[str, str]) -> str:
    """The page of a regression across torches (``campaigns.regress``): ``report``
    is its regress.json, ``meanings`` the legend (what each verdict says)."""
    seeded = report.get("seeded_campaigns") or {}
    envs = report["environments"]
    causes = report["root_causes"]
    return _page(
        "regress.html.j2",
        title=f"Regressions: torch {envs['A']['torch']} (A) to torch {envs['B']['torch']} (B)",
        environments=[{**env, "label": label, "campaign": seeded.get(label)} for label, env in envs.items()],
        campaign=report.get("campaign"),
        counts=list(report["counts"].items()),
        changes=[e for e in causes if e["verdict"] not in ("persisting", "absent")],
        causes=causes,
        others=[(e["root_cause"], r) for e in causes for r in e["repros"][1:]],
        meanings=list(meanings.items()),
    )


def render_known_issues_html(table: list[dict], measured: dict, known_upstream: int) -> str:
    """The known-issue triage page (``reports.known_issues_page``): ``known_upstream`` of its rows were found
    reported or fixed upstream already."""
    return _page("known_issues.html.j2", title="Known issues: what to triage first", table=table, measured=measured,
                 known_upstream=known_upstream)
