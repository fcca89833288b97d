"""Planted fault for the report templates: markup in the data must stay text.

Signatures, messages, logs and meta come from compiler errors and can hold
anything. One finding carrying ``<script>`` and the three characters that
break out of an attribute or an entity goes through all three pages (a
campaign's, a model check's, a regression's); if autoescape were off in any
template, the payload would turn into an element or split an attribute.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from campaigns import regress
from reports.html import render_check_html, render_html, render_regress_html
from suites.test_html_report import CHROMIUM, _all, _chromium, _cls, _text, _Tree

pytestmark = pytest.mark.unit

PAYLOAD = "<script>alert(1)</script>\"&'"
FOLDER = f"findings/{PAYLOAD}"


def _finding(out: Path) -> dict:
    """A finding with the payload in every field a page shows, and its folder on disk."""
    folder = out / FOLDER
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text(f"# {PAYLOAD}\nraise SystemExit(1)\n")
    (folder / "log.txt").write_text(f"first line\nlast line {PAYLOAD}\n")
    (folder / "meta.json").write_text(json.dumps({"backend": PAYLOAD, "config": {PAYLOAD: PAYLOAD}}))
    return {"signature": f"differential:crash:dedup:{PAYLOAD}", "oracle": "differential", "kind": "crash",
            "severity": PAYLOAD, "culprit": PAYLOAD, "known_issue": None, "message": f"failed: {PAYLOAD}",
            "count": 1, "folder": FOLDER, "layer": PAYLOAD, "minimized": True, "repro_exit": 1}


def _run(status: str, code: int) -> dict:
    return {"status": status, "exit": code, "seconds": 0.5, "detail": f"got {PAYLOAD}",
            "command": f"python {PAYLOAD}/repro.py", "log": "log.txt"}


def _regress_report(finding: dict) -> dict:
    causes = [{"root_cause": finding["signature"], "known_issue": False, "title": finding["message"], "verdict": "new",
               "recorded": {"torch_seen": [PAYLOAD], "fixed_in": PAYLOAD}, "hits": {PAYLOAD: 2}, "note": PAYLOAD,
               "repros": [{"source": "B campaign", "signature": finding["signature"], "verdict": "new",
                           "A": _run("not-reproduced", 0), "B": _run("reproduced", 1)}] * 2}]
    counts = regress.counts(causes)
    env = {"python": f"/venv/{PAYLOAD}/bin/python", "torch": "2.13.0", "python_version": "3.11"}
    return {"environments": {"A": {**env, "label": "A"}, "B": {**env, "label": "B"}}, "campaign": f"/runs/{PAYLOAD}",
            "seeded_campaigns": {"A": {"ok": False, "detail": PAYLOAD, "programs": None, "folder": PAYLOAD}},
            "seed": 0, "budget": 1.0, "counts": counts, "top_line": regress.top_line(counts), "root_causes": causes}


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, tuple[str, int]]:
    """Each page's HTML and how many <script> elements it has of its own."""
    out = tmp_path_factory.mktemp("planted")
    finding = _finding(out)
    campaign = render_html({"backend": "aot_eager", "torch": "2.13.0", "findings": [finding],
                            "aborted": PAYLOAD, "verdicts": {PAYLOAD: 1}}, out)
    check = render_check_html({"model": PAYLOAD, "backend": "aot_eager", "torch": "2.13.0", "findings": [finding],
                               "verdicts": {"differential": {"status": "fail", "kind": PAYLOAD, "message": PAYLOAD}},
                               "changes": [{"kind": "batch", "description": PAYLOAD, "invalid": PAYLOAD,
                                            "seconds": 0.1, "verdict": "fail", "message": PAYLOAD}]}, out)
    return {"campaign": (campaign, 1), "check": (check, 0),
            "regress": (render_regress_html(_regress_report(finding), regress.MEANING), 0)}


def _check_dom(dom: dict, scripts: int, page: str) -> None:
    assert len(list(_all(dom, lambda n: n["tag"] == "script"))) == scripts
    # an attribute split by the quote would leave names like `&'` or `alert(1)`
    names = {name for n in _all(dom, lambda n: True) for name in n["attrs"]}
    assert all(re.fullmatch(r"[a-z][a-z0-9-]*", name) for name in names), names
    text = _text(dom)
    assert text.count(PAYLOAD) >= 3, text
    if page != "regress":  # the finding's sections: its signature, message, meta and log as text
        section = next(_all(dom, lambda n: n["tag"] == "section"))
        shown = _text(section)
        assert f"differential:crash:dedup:{PAYLOAD}" in shown and f"failed: {PAYLOAD}" in shown
        assert _text(next(_all(section, _cls("log")))).endswith(f"last line {PAYLOAD}")
        assert _text(next(_all(section, _cls("repro")))).lstrip("\n") == f"# {PAYLOAD}\nraise SystemExit(1)\n"
        assert json.dumps({PAYLOAD: PAYLOAD}) in shown  # meta.json's config, as JSON text
        links = [n["attrs"]["href"] for n in _all(section, lambda n: n["tag"] == "a")]
        assert links[0] == "findings/%3Cscript%3Ealert%281%29%3C/script%3E%22%26%27/repro.py", links
    if page == "campaign":  # the severity is an attribute value: back verbatim
        groups = [n["attrs"]["data-severity"] for n in _all(dom, lambda n: "data-severity" in n["attrs"])]
        assert PAYLOAD in groups, groups


@pytest.mark.parametrize("page", ["campaign", "check", "regress"])
def test_planted_markup_stays_text(pages, page):
    html, scripts = pages[page]
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&amp;&#39;" in html
    _check_dom(_Tree(html).root, scripts, page)


@pytest.mark.parametrize("page", ["campaign", "check", "regress"])
def test_planted_markup_stays_text_in_a_browser(pages, page, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: `apt-get install chromium` to run the browser tests")
    html, scripts = pages[page]
    file = tmp_path / "page.html"
    file.write_text(html)
    dumped = _chromium("--dump-dom", file.as_uri(), profile=tmp_path / "profile")
    assert dumped.returncode == 0 and "</html>" in dumped.stdout, dumped.stderr[-2000:]
    _check_dom(_Tree(dumped.stdout).root, scripts, page)
