"""The README and docs/ cannot drift from the code: every command line they
show goes through the command line's own parser, and every relative link
(and its anchor) resolves. Each check also fails on a planted stale command
and a planted broken link, so neither can pass by finding nothing.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from campaigns.cli import _parser

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
# A command line: an optional prompt and environment assignments, then the harness by either name.
COMMAND = re.compile(r"^(?:\$\s+)?(?:[A-Z_]+=\S*\s+)*(?:\S*python3?\s+-m\s+harness|dedup-harness)(?:\s|$)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def commands(text: str) -> list[str]:
    """The harness command lines of the page's fenced blocks (continuation lines joined)."""
    found = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if COMMAND.match(line):
                found.append(line)
    return found


def stale(line: str) -> str:
    """Why the parser rejects the command line ("" when it parses)."""
    words = shlex.split(line, comments=True)
    start = next(i for i, w in enumerate(words) if w in ("harness", "dedup-harness")) + 1
    args = [w for w in words[start:] if w not in ("|", "&&")]
    args = args[:next((i for i, w in enumerate(args) if w in ("|", ">", "&&", ";")), len(args))]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            _parser(args).parse_args(args)
    except SystemExit as e:
        if e.code:
            return err.getvalue().strip() or f"exit {e.code}"
    return ""


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m) for m in re.findall(r"^#+\s+(.*)$", text, re.M)}


def broken(page: Path, text: str) -> list[str]:
    """The page's relative links whose file or anchor does not exist."""
    bad = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            bad.append(f"{target}: no heading #{anchor} in {file.name}")
    return bad


def test_the_docs_exist_and_the_readme_is_short():
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 150, "README.md is for a screen or two: move detail to docs/"
    assert len(PAGES) > 1, "no docs/ pages"
    linked = set(LINK.findall(readme.read_text()))
    assert all(any(p.name in t for t in linked) for p in PAGES[1:]), "the README links every docs page"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_shown_parses(page):
    lines = commands(page.read_text())
    failures = [f"{line}\n    {why}" for line in lines if (why := stale(line))]
    assert not failures, f"{page.name}: commands the CLI rejects:\n" + "\n".join(failures)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert not broken(page, page.read_text()), broken(page, page.read_text())


def test_a_planted_stale_command_and_broken_link_are_caught(tmp_path):
    page = tmp_path / "page.md"
    text = ("```sh\nmake test\npython -m harness fuzz --budget 60 \\\n  --no-such-option 3\n"
            "dedup-harness report repro KI-003\n```\n# Here\n[ok](#here) [gone](missing.md) [bad](#nowhere)\n")
    page.write_text(text)
    lines = commands(text)
    assert lines == ["python -m harness fuzz --budget 60    --no-such-option 3", "dedup-harness report repro KI-003"]
    assert "--no-such-option" in stale(lines[0]) and stale(lines[1]) == ""
    assert broken(page, text) == ["missing.md: no such file", "#nowhere: no heading #nowhere in page.md"]
