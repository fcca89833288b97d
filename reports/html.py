"""A campaign's report as one self-contained HTML page.

The page must open anywhere a campaign folder is copied to (a CI artifact, a
laptop without network), so everything is inline: CSS, SVG plots and a small
filter script; the only links are relative ones into the campaign's own
``findings/`` folders. Everything taken from data is escaped: signatures and
messages carry ``<``, ``&`` and quotes from compiler errors.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from html import escape
from pathlib import Path
from typing import Any, Iterable, Optional
from urllib.parse import quote

from reports.schema import REPRO_EXITS, SEVERITIES, confirmed, grouped, root_cause_line

LOG_TAIL = 60

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1150px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}tr.group th{background:#e4e9f2}td.num{text-align:right}
code,pre{font:12px/1.35 ui-monospace,monospace}pre{background:#f7f7f7;border:1px solid #ddd;padding:.6em;overflow:auto;max-height:40em}
.new{background:#c62828;color:#fff;padding:0 .4em;border-radius:3px;font-weight:bold}
.known{background:#e0e0e0;padding:0 .4em;border-radius:3px}
.aborted{background:#fff3e0;border:1px solid #ef6c00;padding:.5em}
.missing{color:#c62828}.zero{color:#c62828;font-weight:bold}.muted{color:#777}
.grid{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}
svg{background:#fff;border:1px solid #ddd}svg text{font:11px sans-serif}
"""

# Filters the summary table by a substring of the row's text: big campaigns
# have hundreds of signatures. Shows how many rows match.
_SCRIPT = """
(function(){var box=document.getElementById('filter'),n=document.getElementById('shown');
var rows=document.querySelectorAll('#findings tr.finding');
function apply(){var q=box.value.toLowerCase(),k=0;rows.forEach(function(r){
var on=r.textContent.toLowerCase().indexOf(q)>=0;r.style.display=on?'':'none';k+=on;});
n.textContent=k+' of '+rows.length+' shown';}
box.addEventListener('input',apply);apply();})();
"""


def render_html(summary: dict, out: Path) -> str:
    """The report page for ``summary`` (see ``reports.schema``); finding folders are read under ``out``."""
    out = Path(out)
    findings = list(summary.get("findings") or [])
    title = f"Fuzz campaign: {summary.get('backend', '?')} on torch {summary.get('torch', '?')}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _header(summary),
        _findings_table(findings),
        _plots(summary.get("timeline") or []),
        _coverage(summary.get("coverage") or {}),
        _cudagraphs(summary.get("cudagraphs") or {}),
        _generator(summary.get("generator") or {}),
        '<h2 id="details">Findings in detail</h2>',
        *(_finding_section(f, out) for f in _ordered(findings)),
        f"<script>{_SCRIPT}</script></body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


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


def _table(rows: Iterable[tuple[Any, str]]) -> str:
    """Key/value rows; values are HTML already."""
    return "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _counts(counts: dict, empty: str) -> str:
    if not counts:
        return f'<p class="muted">{_e(empty)}</p>'
    rows = "".join(f'<tr><th>{_e(k)}</th><td class="num">{_e(v)}</td></tr>' for k, v in sorted(counts.items()))
    return f"<table><tr><th></th><th>count</th></tr>{rows}</table>"


def _header(s: dict) -> str:
    share = s.get("deduplicated_share")
    fields = [
        ("backend", s.get("backend")), ("torch", s.get("torch")), ("python", s.get("python")),
        ("seed", s.get("seed")), ("shard", s.get("shard")), ("workers", s.get("workers")),
        ("oracles", ", ".join(s.get("oracles") or []) or None),
        ("programs", s.get("programs")), ("seconds", s.get("seconds")),
        ("programs/s", s.get("programs_per_second")),
        ("deduplicated share", f"{share:.1%}" if isinstance(share, (int, float)) else share),
    ]
    html = f'<p id="root-causes"><b>{_e(root_cause_line(s))}</b></p>'
    if s.get("unavailable"):
        html += (f'<p id="unavailable">Unavailable on torch {_e(s.get("torch"))}: '
                 + "; ".join(f"{_e(k)} ({_e(v)})" for k, v in s["unavailable"].items()) + "</p>")
    if s.get("aborted"):
        html += f'<p class="aborted" id="aborted"><b>Aborted early:</b> {_e(s["aborted"])}</p>'
    html += _table((k, _e("—" if v is None else v)) for k, v in fields)
    per_stage = s.get("seconds_per_program") or {}
    if per_stage:
        html += "<p>Seconds per program by stage: " + ", ".join(
            f"{_e(k)} {_e(v)}" for k, v in per_stage.items()) + " (the rest: triage and localization).</p>"
    html += '<div class="grid"><div><h3>Verdicts</h3>' + _counts(s.get("verdicts") or {}, "no verdicts")
    html += "</div><div><h3>Findings by severity</h3>" + _counts(s.get("findings_by_severity") or {}, "none")
    html += "</div><div><h3>Workers lost</h3>" + _counts(s.get("workers_lost") or {}, "none lost") + "</div></div>"
    return html


def _repro_status(code: Optional[int]) -> str:
    if code is None:
        return '<span class="muted">not run</span>'
    meaning = REPRO_EXITS.get(code, "error")
    return f"{_e(code)} ({meaning})"


def _known(f: dict) -> str:
    ki = f.get("known_issue")
    return f'<span class="known">{_e(ki)}</span>' if ki else '<span class="new">NEW</span>'


def _findings_table(findings: list[dict]) -> str:
    head = ("signature", "hits", "known issue", "culprit", "first failing layer", "minimized", "repro exit", "")
    html = ['<h2 id="summary">Distinct findings</h2>',
            '<p><input id="filter" placeholder="filter signatures" size="40"> <span id="shown"></span></p>',
            '<table id="findings"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>"]
    for severity, title, rows in grouped(findings, _severity_order(findings)):
        html.append(f'<tbody data-severity="{_e(severity)}"><tr class="group"><th colspan="{len(head)}">'
                    f"{_e(title)} ({len(rows)})</th></tr>")
        if not rows:
            html.append(f'<tr class="none"><td colspan="{len(head)}" class="muted">none</td></tr>')
        for f in rows:
            minimized = f.get("minimized")
            html.append(
                f'<tr class="finding"><td><code>{_e(f.get("signature"))}</code></td>'
                f'<td class="num">{_e(f.get("count", 0))}</td><td>{_known(f)}</td><td>{_e(f.get("culprit"))}</td>'
                f'<td>{_e(f.get("layer"))}</td><td>{"yes" if minimized else "no" if minimized is not None else "?"}</td>'
                f'<td>{_repro_status(f.get("repro_exit"))}</td>'
                f'<td><a href="#{section_id(str(f.get("signature")))}">details</a></td></tr>')
        html.append("</tbody>")
    html.append("</table>")
    return "\n".join(html)


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _finding_section(f: dict, out: Path, files: tuple[str, ...] = ("repro.py", "log.txt", "meta.json", "program.json")) -> str:
    sig = str(f.get("signature"))
    folder_name = f.get("folder") or "(no folder recorded)"
    folder = out / folder_name
    meta = {k: v for k, v in f.items() if k not in ("signature", "message")}
    meta_text = _read(folder / "meta.json")
    note = ""
    if meta_text is None:
        note = f'<p class="missing">meta.json missing in {_e(folder_name)}</p>'
    else:
        try:  # fields only meta.json has (backend, config) join the finding's own
            meta.update({k: v for k, v in json.loads(meta_text).items() if k not in f and k != "message"})
        except (ValueError, AttributeError):
            note = f'<p class="missing">meta.json in {_e(folder_name)} is not a JSON object</p>'
    rows = ((k, f"<code>{_e(json.dumps(v, default=str) if isinstance(v, (dict, list)) else v)}</code>"
                if v is not None else "—") for k, v in meta.items())
    files = " ".join(
        f'<a href="{_e(quote(folder_name))}/{n}">{n}</a>' if (folder / n).is_file() else f'<span class="missing">{n} missing</span>'
        for n in files)
    # each <pre> opens with a newline: HTML parsing drops one there, so a file's own leading newline survives
    repro = _read(folder / "repro.py")
    log = _read(folder / "log.txt")
    if log is not None:
        lines = log.splitlines()
        shown = lines[-LOG_TAIL:]
        log_html = (f"<details><summary>log.txt: last {len(shown)} of {len(lines)} lines</summary>"
                    f'<pre class="log">\n{_e(chr(10).join(shown))}</pre></details>')
    else:
        log_html = f'<p class="missing">log.txt missing in {_e(folder_name)}</p>'
    return (
        f'<section id="{section_id(sig)}" class="finding"><h3><code>{_e(sig)}</code> {_known(f)}</h3>'
        f'<p class="message">{_e(f.get("message") or "(no message recorded)")}</p>'
        f"<p>Files: {files}</p>{note}{_table(rows)}"
        + (f'<h4>repro.py</h4><pre class="repro">\n{_e(repro)}</pre>' if repro is not None
           else f'<p class="missing">repro.py missing in {_e(folder_name)}</p>')
        + f'{log_html}<p><a href="#summary">back to the table</a></p></section>')


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
               xlabel: str, ylabel: str) -> str:
    """An SVG line chart with one polyline (and point markers, so one point still shows) per series."""
    w, h, left, right, top, bottom = 540, 300, 60, 15, 30, 45
    if not xs:
        return (f'<svg id="{plot_id}" width="{w}" height="80" role="img"><text x="10" y="20">{_e(title)}</text>'
                '<text x="10" y="50" fill="#777">no timeline points yet</text></svg>')
    xt = _nice_ticks(min(0.0, min(xs)), max(xs))
    yt = _nice_ticks(0.0, max([max(ys) for _, ys, _ in series if ys] + [0.0]))
    sx = lambda x: left + (x - xt[0]) / (xt[-1] - xt[0]) * (w - left - right)  # noqa: E731
    sy = lambda y: h - bottom - (y - yt[0]) / (yt[-1] - yt[0]) * (h - top - bottom)  # noqa: E731
    svg = [f'<svg id="{plot_id}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{_e(title)}">',
           f'<text x="{w / 2}" y="18" text-anchor="middle" font-weight="bold">{_e(title)}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="#333"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="#333"/>']
    for x in xt:
        svg.append(f'<line x1="{sx(x):.1f}" y1="{h - bottom}" x2="{sx(x):.1f}" y2="{h - bottom + 4}" stroke="#333"/>'
                   f'<text x="{sx(x):.1f}" y="{h - bottom + 16}" text-anchor="middle">{_fmt(x)}</text>')
    for y in yt:
        svg.append(f'<line x1="{left}" y1="{sy(y):.1f}" x2="{w - right}" y2="{sy(y):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{_fmt(y)}</text>')
    svg.append(f'<text x="{(left + w - right) / 2}" y="{h - 8}" text-anchor="middle">{_e(xlabel)}</text>'
               f'<text transform="translate(14,{(top + h - bottom) / 2}) rotate(-90)" text-anchor="middle">{_e(ylabel)}</text>')
    for i, (label, ys, color) in enumerate(series):
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys))
        svg.append(f'<polyline class="series" data-series="{_e(label)}" points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        svg += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"/>' for x, y in zip(xs, ys)]
        svg.append(f'<rect x="{left + 10}" y="{top + 4 + 16 * i}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{left + 25}" y="{top + 13 + 16 * i}">{_e(label)}</text>')
    svg.append("</svg>")
    return "".join(svg)


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


def _plots(timeline: list[dict]) -> str:
    xs = [float(p.get("t", 0)) for p in timeline]
    found = line_chart("plot-findings", "Failures and distinct findings over time", xs,
                       [("failures", [float(p.get("failures", 0)) for p in timeline], "#c62828"),
                        ("distinct findings", [float(p.get("distinct", 0)) for p in timeline], "#1565c0")],
                       "seconds since start", "count")
    speed = line_chart("plot-throughput", "Throughput over time", xs,
                       [("programs/s (last 30 s)", throughput(timeline), "#2e7d32")], "seconds since start", "programs per second")
    return f'<h2 id="plots">Over time</h2><div class="grid">{found}{speed}</div>'


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


def _pct(v: Any) -> str:
    return "—" if v is None else f"{v:.1f}%" if isinstance(v, (int, float)) else _e(v)


def _coverage(coverage: dict) -> str:
    if not coverage:
        return ""
    rows = []
    for name, c in sorted(coverage.items()):
        c = c if isinstance(c, dict) else {}
        missing = _ranges(c.get("missing"))
        count = f"{len(c['missing'])} lines in " if isinstance(c.get("missing"), list) else ""
        cell = (f"<details><summary>{count}{missing.count(',') + 1} ranges</summary><code>{_e(missing)}</code></details>"
                if missing else '<span class="muted">none</span>')
        rows.append(f'<tr><td><code>{_e(name)}</code></td><td class="num">{_pct(c.get("lines"))}</td>'
                    f'<td class="num">{_pct(c.get("branches"))}</td><td>{cell}</td></tr>')
    return ('<h2 id="coverage">Coverage</h2><table id="coverage-table"><thead><tr><th>file</th><th>lines</th>'
            f'<th>branches</th><th>missing lines</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _cudagraphs(counts: dict) -> str:
    """Replay runs by whether CUDA graphs engaged: a skip is shown with its reason, never as a pass."""
    if not counts:
        return ""
    rows = "".join(f'<tr><td class="num">{_e(n)}</td><td>{_e(what)}</td></tr>' for what, n in counts.items())
    return (f'<h2 id="cudagraphs">CUDA graphs</h2><table id="cudagraphs-table">'
            f"<tr><th>runs</th><th>engaged, or why not</th></tr>{rows}</table>")


def _generator(generator: dict) -> str:
    if not generator:
        return ""
    # rarest first: a feature the generator never drew is the thing to notice
    items = sorted(generator.items(), key=lambda kv: (kv[1], kv[0]))
    cells = "".join(f'<tr><td><code>{_e(k)}</code></td><td class="num{" zero" if not v else ""}">{_e(v)}</td></tr>'
                    for k, v in items)
    return (f'<h2 id="generator">Generator coverage</h2><details{" open" if len(items) <= 40 else ""}><summary>{len(items)} features, '
            f'{sum(1 for _, v in items if not v)} never drawn</summary><table id="generator-table">'
            f"<tr><th>feature</th><th>programs</th></tr>{cells}</table></details>")


def render_check_html(summary: dict, out: Path) -> str:
    """The page of a model check (``campaigns.check``): the model's verdicts,
    its changed calls with their times, and each finding as a campaign's."""
    out = Path(out)
    findings = list(summary.get("findings") or [])
    title = f"Model check: {summary.get('model', '?')} on {summary.get('backend', '?')}, torch {summary.get('torch', '?')}"
    fields = [("model", summary.get("model")), ("backend", summary.get("backend")), ("torch", summary.get("torch")),
              ("seconds", summary.get("seconds")), ("invoke_subgraph calls", summary.get("invoke_subgraph_calls")),
              ("graphs", summary.get("frames")), ("region groups", summary.get("region_groups"))]
    stages = ", ".join(f"{_e(k)} {_e(v)}" for k, v in (summary.get("seconds_by_stage") or {}).items())
    verdicts = "".join(
        f'<tr class="verdict"><td>{_e(name)}</td><td>{_e(v.get("status"))}{" [" + _e(v["kind"]) + "]" if v.get("kind") else ""}'
        f'</td><td>{_e(v.get("message"))}</td></tr>' for name, v in (summary.get("verdicts") or {}).items())
    changes = "".join(
        f'<tr class="change"><td><code>{_e(c.get("kind"))}</code></td><td>{_e(c.get("description"))}</td>'
        f'<td>{_e(c.get("invalid") or ("recompiled" if c.get("recompiled") else "served by the first entry"))}</td>'
        f'<td>{_e(c.get("verdict", "—"))} <span class="muted">{_e(c.get("message", ""))}</span></td>'
        f'<td class="num">{_e(c.get("seconds"))}</td></tr>' for c in summary.get("changes") or [])
    rows = "".join(
        f'<tr class="finding"><td><code>{_e(f.get("signature"))}</code></td><td>{_known(f)}</td>'
        f'<td>{_e(f.get("culprit"))}</td><td><a href="#{section_id(str(f.get("signature")))}">details</a></td></tr>'
        for f in findings) or '<tr class="none"><td colspan="4" class="muted">none</td></tr>'
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>", f"<h1>{_e(title)}</h1>",
        _table((k, _e("—" if v is None else v)) for k, v in fields),
        f"<p>Seconds by stage: {stages}.</p>" if stages else "",
        '<h2 id="verdicts">Verdicts</h2><table id="verdict-table"><tr><th>oracle</th><th>verdict</th><th></th></tr>'
        f"{verdicts}</table>",
        '<h2 id="changes">Changed calls</h2><table id="change-table"><tr><th>change</th><th>what</th><th>call</th>'
        f"<th>verdict</th><th>seconds</th></tr>{changes}</table>" if changes else "",
        '<h2 id="summary">Findings</h2><table id="findings"><tr><th>signature</th><th>known issue</th><th>culprit</th>'
        f"<th></th></tr>{rows}</table>",
        '<h2 id="details">Findings in detail</h2>' if findings else "",
        *(_finding_section(f, out, ("repro.py", "log.txt", "meta.json")) for f in findings),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)
