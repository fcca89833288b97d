"""``python -m harness regress`` on fake baselines: the installed interpreter plays both torches.

CI has one torch, so the two environments are two small wrapper scripts
around ``sys.executable`` that differ only in an environment variable
(REGRESS_SIDE); each fake known issue's repro.py reads it and exits with the
status its case needs in that environment. One wrapper also stands in for
``-m harness fuzz``, writing a campaign folder with a finding, so the seeded
campaign's findings go through the same replay as the real ones would.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from campaigns.cli import main
from reports import known_issues
from campaigns import regress

pytestmark = pytest.mark.unit

# case -> (exit in A, exit in B); a string exit is the repro's whole body
CASES = {
    "KI-101": ("fixed", 1, 0),
    "KI-102": ("persisting", 1, 1),
    "KI-103": ("changed", 1, 3),
    "KI-104": ("new", 0, 1),
    "KI-105": ("error", 1, 2),
    "KI-106": ("absent", 0, 0),
    "KI-107": ("error", 1, "raise SystemExit(1)"),  # exit 1 with no REPRODUCED line: it crashed before its check
    "KI-108": ("error", 1, "import time; time.sleep(60)"),  # past the timeout
    "KI-109": ("absent", 3, 3),  # the same other failure on both: nothing changed from A to B
    "KI-110": ("changed", 3, "print('FAILS DIFFERENTLY (exit 3): another crash'); sys.exit(3)"),
}
REPRO = '''import os, sys
side = os.environ["REGRESS_SIDE"]
status = {statuses}[side]
if isinstance(status, str):
    exec(status)
print({{0: "not reproduced: passes", 1: "REPRODUCED: fake failure", 3: "FAILS DIFFERENTLY (exit 3): fake"}}.get(status, "ERROR"))
sys.exit(status)
'''
WRAPPER = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "harness" ]; then REGRESS_SIDE={side} exec {python} {fuzz} "$@"; fi
REGRESS_SIDE={side} exec {python} "$@"
"""
# Stands in for `-m harness fuzz --out DIR` in B: a campaign with a new finding that reproduces only in B,
# and one of KI-101 (fixed by its baseline repro) that persists.
FAKE_FUZZ = '''import json, os, sys
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True)
findings = []
for sig, known, body in [] if os.environ["REGRESS_SIDE"] == "A" else [("differential:crash:dedup:dynamo:NewError", None, {"A": 0, "B": 1}),
                         ("differential:wrong_value:dedup:arg:float", "KI-101", {"A": 1, "B": 1})]:
    folder = out / "findings" / sig.replace(":", "-")
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text(REPRO.format(statuses=body))
    findings.append({"signature": sig, "known_issue": known, "folder": str(folder.relative_to(out)), "count": 4,
                     "message": "a fake finding\\nsecond line"})
(out / "summary.json").write_text(json.dumps({"programs": 12, "findings": findings}))
print("12 programs")
'''


def _fake_root(tmp_path: Path, cases=CASES) -> Path:
    """Known-issue folders with a real program.json (KI-001's) and a repro.py exiting as the case says."""
    program = known_issues.load()[0].folder / "program.json"
    root = tmp_path / "known_issues"
    for ki, (title, a, b) in cases.items():
        folder = root / f"{ki}-{title}"
        folder.mkdir(parents=True)
        (folder / "issue.json").write_text(json.dumps({
            "id": ki, "title": f"fake {title}", "patterns": [f"fake:{ki}:*"], "backend": "eager",
            "description": "a fake issue", "torch_seen": ["2.13.0"]}))
        shutil.copy(program, folder / "program.json")
        (folder / "repro.py").write_text(REPRO.format(statuses={"A": a, "B": b}))
    return root


GIVEN = "guards:stale:backend:free:global"


def _given_campaign(tmp_path: Path) -> Path:
    """A campaign folder as `fuzz` leaves it, with one finding that reproduces in both environments."""
    out = tmp_path / "given"
    folder = out / "findings" / "stale"
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text(REPRO.format(statuses={"A": 1, "B": 1}))
    (out / "summary.json").write_text(json.dumps({"programs": 3, "findings": [
        {"signature": GIVEN, "known_issue": None, "folder": "findings/stale", "count": 2, "message": "stale"}]}))
    return out


def _env(tmp_path: Path, side: str) -> Path:
    """A venv-like folder whose bin/python is the installed interpreter with REGRESS_SIDE set."""
    fuzz = tmp_path / "fake_fuzz.py"
    fuzz.write_text(f"REPRO = {REPRO!r}\n" + FAKE_FUZZ)
    python = tmp_path / f"env{side}" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(WRAPPER.format(python=sys.executable, fuzz=fuzz, side=side))
    python.chmod(0o755)
    return python.parent.parent


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One regress run over the fake baseline and a fake seeded campaign (the expensive part, shared)."""
    tmp = tmp_path_factory.mktemp("regress")
    options = regress.Options(torches=(str(_env(tmp, "A")), str(_env(tmp, "B") / "bin" / "python")),
                              out=tmp / "out", campaign=_given_campaign(tmp), budget=1, timeout=5, root=_fake_root(tmp))
    return regress.run(options), tmp / "out"


def test_each_root_cause_gets_the_verdict_of_its_statuses(report):
    data, _ = report
    verdicts = {e["root_cause"]: e["verdict"] for e in data["root_causes"]}
    assert {ki: verdicts[ki] for ki in CASES} == {ki: case[0] for ki, case in CASES.items()}
    new = "differential:crash:dedup:dynamo:NewError"
    assert verdicts[new] == "new" and verdicts[GIVEN] == "persisting" and len(verdicts) == len(CASES) + 2
    assert data["counts"] == {"fixed": 1, "persisting": 2, "changed": 2, "new": 2, "error": 3, "absent": 2}
    assert data["top_line"] == "1 fixed, 2 persisting, 2 changed, 2 new, 3 errors (2 reproduced in neither)"
    given = next(e for e in data["root_causes"] if e["root_cause"] == GIVEN)
    assert given["hits"] == {"campaign": 2} and given["repros"][0]["source"] == "campaign"


def test_errors_say_why(report):
    data, _ = report
    by = {e["root_cause"]: e["repros"][0] for e in data["root_causes"]}
    assert by["KI-107"]["B"]["exit"] == 1 and by["KI-107"]["B"]["status"] == "error"
    assert by["KI-108"]["B"]["exit"] is None and by["KI-108"]["B"]["detail"] == "timed out after 5 s"
    assert by["KI-105"]["B"]["detail"] == "ERROR"
    assert by["KI-103"]["B"]["detail"].startswith("FAILS DIFFERENTLY")


def test_a_known_issue_keeps_its_baseline_verdict_and_notes_other_forms(report):
    data, _ = report
    ki = next(e for e in data["root_causes"] if e["root_cause"] == "KI-101")
    assert ki["verdict"] == "fixed" and [r["source"] for r in ki["repros"]] == ["baseline", "B campaign"]
    assert "persisting" in ki["note"] and ki["hits"] == {"B campaign": 4}
    assert ki["recorded"] == {"torch_seen": ["2.13.0"], "fixed_in": None}


def test_environments_and_commands_come_from_the_interpreters(report):
    data, out = report
    import torch

    envs = data["environments"]
    assert envs["A"]["python"].endswith("envA/bin/python") and envs["B"]["python"].endswith("envB/bin/python")
    assert envs["A"]["torch"] == envs["B"]["torch"] == torch.__version__
    first = data["root_causes"][0]["repros"][0]
    assert first["A"]["command"] == f"{envs['A']['python']} {first['repro']}"
    assert Path(first["A"]["log"]).read_text().startswith(f"$ {first['A']['command']}")
    assert all(data["seeded_campaigns"][e]["ok"] and data["seeded_campaigns"][e]["programs"] == 12 for e in "AB")
    assert data["seeded_campaigns"]["A"]["command"].startswith(f"{envs['A']['python']} -m harness fuzz --budget 1 --seed 0")
    assert (out / "B" / "campaign" / "summary.json").exists()
    on_disk = json.loads((out / "regress.json").read_text())
    assert on_disk["counts"] == data["counts"]


def test_markdown_lists_every_root_cause_with_its_commands(report):
    data, out = report
    md = (out / "regress.md").read_text()
    assert data["top_line"] in md
    for e in data["root_causes"]:
        assert e["root_cause"] in md
        for r in e["repros"]:
            assert r["A"]["command"] in md and r["B"]["command"] in md


def test_html_page_in_chromium(report, tmp_path):
    from suites.test_html_report import CHROMIUM, _all, _chromium, _text, _Tree

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: `apt-get install chromium` to run the browser tests")
    data, out = report
    page = out / "regress.html"
    html = page.read_text()
    assert "src=" not in html and "<link" not in html and "<script" not in html
    dumped = _chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile")
    assert dumped.returncode == 0 and "</html>" in dumped.stdout, dumped.stderr[-2000:]
    dom = _Tree(dumped.stdout).root
    rows = list(_all(dom, lambda n: "cause" in (n["attrs"].get("class") or "").split()))
    assert [r["attrs"]["data-verdict"] for r in rows] == [e["verdict"] for e in data["root_causes"]]
    counts = {n["attrs"]["data-verdict"]: int(_text(n)) for n in _all(dom, lambda n: "count" in (n["attrs"].get("class") or ""))}
    assert counts == data["counts"]
    changed = [_text(n) for n in _all(dom, lambda n: n["tag"] == "li" and list(_all(n, lambda m: m["tag"] == "b")))]
    assert len(changed) == sum(e["verdict"] not in ("persisting", "absent") for e in data["root_causes"])
    text = _text(dom)
    assert all(r["B"]["command"] in text for e in data["root_causes"] for r in e["repros"])


def test_a_campaign_that_fails_is_reported_not_raised(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'error: no such backend' >&2\nexit 2\n")
    python.chmod(0o755)
    env = regress.Env("A", str(python), "2.13.0", "3.11")
    done = regress.run_campaign(env, tmp_path / "out", budget=1, seed=3)
    assert not done["ok"] and done["exit"] == 2 and done["detail"] == "error: no such backend"
    assert "--seed 3" in done["command"] and done["programs"] is None


def test_verdict_table():
    R, N, D, E = regress.REPRODUCED, regress.NOT_REPRODUCED, regress.DIFFERS, regress.ERROR
    assert [regress.verdict(a, b) for a, b in [(R, N), (R, R), (R, D), (N, R), (N, D), (D, N), (N, N), (R, E), (E, R),
                                                (D, D), (D, R)]] \
        == ["fixed", "persisting", "changed", "new", "changed", "fixed", "absent", "error", "error", "changed", "changed"]
    assert regress.verdict(D, D, alike=True) == "absent" and regress.verdict(R, D, alike=True) == "changed"
    assert regress.status(1, "Traceback ...\nAttributeError: no nested_compile_region") == E
    assert regress.status(1, "REPRODUCED: x") == R and regress.status(-11, "") == E and regress.status(None, "") == E


def _no_torch(tmp_path: Path) -> Path:
    """An interpreter that runs but has no torch (as a Python without it answers)."""
    python = tmp_path / "bare" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
    python.chmod(0o755)
    return python.parent.parent


@pytest.mark.parametrize("make_args, message", [
    (lambda t: ["--torch", str(t / "nowhere")], "error: regress compares two environments: give --torch twice"),
    (lambda t: ["--torch", str(t / "nowhere"), "--torch", sys.executable], "error: --torch "),
    (lambda t: ["--torch", str(_no_torch(t)), "--torch", sys.executable], "cannot import torch"),
    (lambda t: ["--torch", sys.executable, "--torch", sys.executable, "--campaign", str(t)], "not a campaign folder"),
    (lambda t: ["--torch", sys.executable, "--torch", sys.executable, "--campaign", str(t / "nope")], "not a folder"),
])
def test_bad_input_is_one_error_line(tmp_path, capsys, make_args, message):
    code = main(["regress", *make_args(tmp_path), "--no-campaign", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_known_issue_whose_program_now_meets_another_recorded_bug_is_fixed():
    # KI-007 on 2.15: its own crash is gone and the program now fails with
    # KI-003's KeyError: KI-007 is fixed; KI-018's new crash is no recorded bug: changed
    from reports import known_issues
    from campaigns import regress

    issues = {i.id: i for i in known_issues.load()}

    def entry(cause: str, got: str) -> dict:
        a = {"status": regress.REPRODUCED, "detail": "REPRODUCED: ..."}
        b = {"status": regress.DIFFERS, "detail": f"FAILS DIFFERENTLY (exit 3): expected X, got {got}"}
        return {"source": "baseline", "A": a, "B": b}

    assert regress._now_known(entry("KI-007", "InternalTorchDynamoError: KeyError: example_value"), "KI-007", issues) == "KI-003"
    assert regress._now_known(entry("KI-018", "AssertionError: Freevar has no source"), "KI-018", issues) is None
