"""The HTML report opened in a real headless Chromium, and the JUnit XML parsed back.

A string check on the generated HTML would not show a broken page: an
unescaped ``<`` in a signature or repro swallows the rest of the document only
once a browser parses it. So the page goes through Chromium (``--dump-dom``
gives the DOM after the parser and the filter script ran; ``--screenshot``
shows it lays out to something visible) and the assertions read that DOM.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports.schema import UNCONFIRMED

from reports.html import render_html, section_id, throughput
from reports.junit import render_junit

pytestmark = pytest.mark.unit

CHROMIUM = "/usr/bin/chromium"
# markup, entities and quotes to escape, and a leading newline a <pre> would drop
REPRO = '''
"""repro for {sig}"""
import sys
import torch
if torch.ones(1) < 2 and 1 & 3:  # </pre><script>document.title = "pwned"</script>
    print("mismatch: \\"a\\" <b> & 'c'")
    sys.exit(1)
'''


def _finding(sig, oracle, severity, known=None, count=1, **extra):
    slug = "".join(c if c.isalnum() else "-" for c in sig)[:60]
    return {"signature": sig, "oracle": oracle, "kind": sig.split(":")[1], "severity": severity, "culprit": "dedup",
            "known_issue": known, "message": f"{oracle} failed: <tensor> & \"{sig}\"", "first_seen": "2025-01-01T00:00:00",
            "count": count, "folder": f"findings/{slug}", "size": 3, "layer": "first fails on aot_eager: <AOT> & co",
            "minimized": True, "repro_exit": 1, **extra}


def make_campaign(out: Path) -> dict:
    """A summary as a campaign writes it, with finding folders (some files missing on purpose)."""
    findings = [
        _finding('differential:wrong_value:dedup:arg:float<"x"&y>', "differential", "wrong", count=9),
        _finding("region_identity:merged:dedup:constant<float> & \"str\"", "region_identity", "wrong", "KI-001", 4),
        _finding("completeness:missed:dedup:identical-repeats", "completeness", "missed", count=3, repro_exit=None,
                 minimized=False),
        _finding("recompiles:recompile:backend:attr&<model.eval>", "recompiles", "recompile", count=2, repro_exit=0),
        _finding("mystery:odd:backend:<none>", "mystery", "flaky", count=1),  # unknown severity, no folder at all
    ]
    for i, f in enumerate(findings[:4]):
        folder = out / f["folder"]
        folder.mkdir(parents=True)
        (folder / "repro.py").write_text(REPRO.format(sig=f["signature"]))
        if i != 2:  # the missed-optimization finding lacks its log and meta
            (folder / "log.txt").write_text("\n".join(f"log line {n} <&>" for n in range(100)))
            (folder / "meta.json").write_text('{"backend": "aot_eager", "config": {"use_graph_deduplication": true}}')
        (folder / "program.json").write_text("{}")
    timeline = [{"t": 6.0 * i + 1.5, "programs": 4 * i + i * i, "failures": 2 * i, "distinct": min(i, 5)}
                for i in range(1, 11)]
    return {
        "backend": "aot_eager", "torch": "2.13.0", "python": "3.11.2", "seed": 7, "shard": "0/2", "workers": 2,
        "oracles": ["differential", "region_identity"], "programs": 140, "seconds": 61.5, "programs_per_second": 2.276,
        "deduplicated_share": 0.41, "seconds_per_program": {"eager": 0.05, "compiled": 0.3},
        "verdicts": {"pass": 500, "fail": 19, "inconclusive": 3}, "changed_calls": {},
        "findings_by_severity": {"wrong": 2, "missed": 1, "recompile": 1, "flaky": 1},
        "workers_lost": {"signal": 1, "hang": 0}, "timeline": timeline,
        "coverage": {"dynamo/graph_region_tracker.py": {"lines": 87.5, "branches": 71.25, "missing": [10, 11, 12, 40, *range(100, 160)]},
                     "dynamo/graph_deduplication.py": {"lines": 93.0, "branches": None, "missing": []}},
        "generator": {"op:add": 120, "loop:while": 14, "state:autocast": 0},
        "aborted": "", "findings": findings,
    }


class _Tree(HTMLParser):
    """The DOM as nested dicts: enough to query by tag, id and class."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.root = {"tag": "#root", "attrs": {}, "children": [], "text": []}
        self.stack = [self.root]
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        node = {"tag": tag, "attrs": dict(attrs), "children": [], "text": []}
        self.stack[-1]["children"].append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i]["tag"] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1]["children"].append(data)


def _all(node, pred):
    for c in node["children"]:
        if isinstance(c, dict):
            if pred(c):
                yield c
            yield from _all(c, pred)


def _one(node, pred):
    found = list(_all(node, pred))
    assert len(found) == 1, found[:2]
    return found[0]


def _text(node) -> str:
    return "".join(c if isinstance(c, str) else _text(c) for c in node["children"])


def _cls(name):
    return lambda n: name in (n["attrs"].get("class") or "").split()


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.skip(f"{CHROMIUM} not found: `apt-get install chromium` to run the browser tests (CI's Makefile does)")
    # xdist workers of one session share the base temp's parent: the first renders,
    # the others wait on the lock and reuse its files (two browser runs, not two per worker)
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "html-report"
    shared.mkdir(exist_ok=True)
    out, page, dom, png = shared / "campaign", shared / "campaign" / "report.html", shared / "dom.html", shared / "report.png"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "done").exists():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            page.write_text(render_html(make_campaign(out), out))
            dumped = _chromium("--dump-dom", page.as_uri(), profile=shared / "profile-dom")
            assert dumped.returncode == 0 and "</html>" in dumped.stdout, dumped.stderr[-2000:]
            dom.write_text(dumped.stdout)
            shot = _chromium(f"--screenshot={png}", "--window-size=1200,2000", page.as_uri(),
                             profile=shared / "profile-shot")
            assert shot.returncode == 0, shot.stderr[-2000:]
            (shared / "done").touch()
    return make_campaign(tmp_path_factory.mktemp("summary")), page.read_text(), _Tree(dom.read_text()).root, png


def test_page_is_self_contained(rendered):
    _, html, _, _ = rendered
    assert "src=" not in html and "<link" not in html and "url(" not in html and "@import" not in html
    hrefs = [h.split('"')[0] for h in html.split('href="')[1:]]
    assert hrefs and all(h.startswith(("#", "findings/")) for h in hrefs), hrefs


def test_one_section_per_finding_with_its_repro(rendered):
    summary, _, dom, _ = rendered
    sections = list(_all(dom, lambda n: n["tag"] == "section"))
    last = [f for f in summary["findings"] if f.get("repro_exit") not in (None, 1)]  # unconfirmed last
    order = [f for f in summary["findings"] if f not in last] + last
    assert [s["attrs"]["id"] for s in sections] == [section_id(f["signature"]) for f in order]
    assert len({s["attrs"]["id"] for s in sections}) == len(sections)
    for section, f in zip(sections, order):
        assert f["signature"] in _text(section) and f["message"] in _text(section)
        repros = list(_all(section, _cls("repro")))
        if f["severity"] == "flaky":  # no folder: said, not crashed
            assert not repros and "repro.py missing" in _text(section)
            continue
        assert _text(repros[0]) == REPRO.format(sig=f["signature"])  # escaped in HTML, back verbatim in the DOM
    # nothing from the data became markup: the repro's </pre><script> stayed text
    assert _text(_one(dom, lambda n: n["tag"] == "title")).startswith("Fuzz campaign")
    assert len(list(_all(dom, lambda n: n["tag"] == "script"))) == 1


def test_top_line_counts_root_causes_before_signatures(rendered):
    summary, _, dom, _ = rendered
    line = _text(_one(dom, lambda n: n["attrs"].get("id") == "root-causes"))
    assert line == ("Root causes: 1 known (KI-001 ×4), 3 new, 1 unconfirmed; 5 distinct signatures."), line


def test_summary_table_groups_by_severity(rendered):
    summary, _, dom, _ = rendered
    table = _one(dom, lambda n: n["attrs"].get("id") == "findings")
    rows = list(_all(table, _cls("finding")))
    assert len(rows) == len(summary["findings"])
    groups = [b["attrs"]["data-severity"] for b in _all(table, lambda n: n["tag"] == "tbody")]
    # schema order, unknown after, then the findings whose repro did not reproduce them
    assert groups == ["wrong", "process", "missed", "recompile", "flaky", "unconfirmed"]
    heads = [_text(g) for g in _all(table, _cls("group"))]
    assert heads[0] == "Wrong results and broken promises (2)" and heads[-2] == "flaky (1)"
    assert heads[-1] == f"{UNCONFIRMED} (1)" and heads[3] == "Unneeded recompiles (0)"  # its repro exits 0
    known = [r for r in rows if "KI-001" in _text(r)]
    assert len(known) == 1 and not list(_all(known[0], _cls("new")))
    assert sum(1 for r in rows if list(_all(r, _cls("new")))) == 4
    links = [_one(r, lambda n: n["tag"] == "a")["attrs"]["href"] for r in rows]
    unconfirmed = [f for f in summary["findings"] if f.get("repro_exit") not in (None, 1)]
    confirmed = [f for f in summary["findings"] if f not in unconfirmed]
    assert links == ["#" + section_id(f["signature"]) for f in confirmed + unconfirmed]
    assert _text(_one(dom, lambda n: n["attrs"].get("id") == "shown")) == "5 of 5 shown"  # the script ran


def test_plots_have_one_point_per_timeline_entry(rendered):
    summary, _, dom, _ = rendered
    n = len(summary["timeline"])
    for plot_id, series in (("plot-findings", 2), ("plot-throughput", 1)):
        svg = _one(dom, lambda node: node["attrs"].get("id") == plot_id)
        lines = list(_all(svg, lambda node: node["tag"] == "polyline"))
        assert len(lines) == series
        assert all(len(line["attrs"]["points"].split()) == n for line in lines)
        text = _text(svg)
        assert "seconds since start" in text and "60" in text  # axis label and a tick


def test_coverage_and_generator_tables(rendered):
    _, _, dom, _ = rendered
    cov = _one(dom, lambda n: n["attrs"].get("id") == "coverage-table")
    text = _text(cov)
    assert "graph_region_tracker.py" in text and "87.5%" in text and "71.2%" in text and "10-12, 40, 100-159" in text
    assert len(list(_all(cov, lambda n: n["tag"] == "tr"))) == 3
    gen = _one(dom, lambda n: n["attrs"].get("id") == "generator-table")
    assert len(list(_all(gen, _cls("zero")))) == 1


def test_header_and_missing_files(rendered):
    _, _, dom, _ = rendered
    text = _text(dom)
    for expected in ("aot_eager", "0/2", "41.0%", "2.276", "Workers lost", "signal"):
        assert expected in text
    assert "log.txt missing" in text and "meta.json missing" in text
    logs = [_text(p) for p in _all(dom, _cls("log"))]
    assert len(logs) == 3 and all(log.splitlines()[0] == "log line 40 <&>" for log in logs)  # the last 60 lines


def test_screenshot_is_not_blank(rendered):
    _, _, _, png = rendered
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1200, 2000)
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    pixels = zlib.decompress(idat)
    # a blank page compresses to rows of one repeated value; text, tables and plots do not
    assert len(set(pixels)) > 100 and len(data) > 30_000


def test_renders_without_browser_for_sparse_summaries(tmp_path):
    """An empty campaign, a one-point timeline and an aborted one still make a page."""
    empty = render_html({}, tmp_path)
    assert "no timeline points yet" in empty and "<section" not in empty
    one = render_html({"timeline": [{"t": 2.0, "programs": 4, "failures": 0, "distinct": 0}],
                       "aborted": "process <state> corrupted"}, tmp_path)
    assert "process &lt;state&gt; corrupted" in one and one.count('points="') == 3
    timeline = [{"t": 2.0, "programs": 4}, {"t": 4.0, "programs": 10}, {"t": 4.0, "programs": 10}]
    assert throughput(timeline, window=1) == [2, 3, 3]  # over the last second
    assert throughput(timeline) == [2, 2.5, 2.5]  # over the last 30 s: since the start


def test_junit_counts_and_aborted_campaign(tmp_path):
    summary = make_campaign(tmp_path)
    root = ET.fromstring(render_junit(summary))
    suite = root.find("testsuite")
    assert root.tag == "testsuites" and suite.get("name").startswith("fuzz campaign aot_eager")
    cases = suite.findall("testcase")
    assert len(cases) == 6 and suite.get("tests") == root.get("tests") == "6"
    assert suite.get("failures") == "4" and suite.get("skipped") == "1" and float(suite.get("time")) == 61.5
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert [c.find("skipped").get("message") for c in skipped] == ["known issue KI-001"]
    first = cases[0]
    assert (first.get("classname"), first.get("name")) == ("differential", summary["findings"][0]["signature"])
    assert "findings/" in first.find("failure").text and "<tensor>" in first.find("failure").get("message")
    campaign = [c for c in cases if c.get("name") == "campaign"]
    assert len(campaign) == 1 and campaign[0].find("failure") is None

    aborted = ET.fromstring(render_junit({**summary, "aborted": "process state corrupted\x01", "findings": []}))
    suite = aborted.find("testsuite")
    assert suite.get("tests") == "1" and suite.get("failures") == "1" and suite.get("skipped") == "0"
    assert suite.find("testcase").find("failure").get("message") == "process state corrupted?"


def test_harness_errors_are_named_in_every_report_form(tmp_path):
    """A campaign whose runs the harness itself failed judged nothing: its report must not read as a clean one
    (on a GPU machine every forked worker once failed every program, and the report said "0 new")."""
    from campaigns.folder import markdown
    from reports.ledger import Ledger

    boom = "Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: the harness broke"
    ledger = Ledger.fold([{"event": "harness_error", "id": str(i), "traceback": boom} for i in range(3)])
    clean = make_campaign(tmp_path)
    summary = {**clean, **{k: ledger.summary()[k] for k in ("errors", "harness_errors")}}
    line = "Harness errors: 3 runs of"
    assert line in markdown(summary) and "`RuntimeError: the harness broke` ×3" in markdown(summary)
    assert line in render_html(summary, tmp_path)
    suite = ET.fromstring(render_junit(summary)).find("testsuite")
    errored = [c for c in suite.findall("testcase") if c.find("error") is not None]
    assert suite.get("errors") == "1" and [c.get("name") for c in errored] == ["harness_errors"]
    assert line not in markdown(clean)
