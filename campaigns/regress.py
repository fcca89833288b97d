"""Regressions across torch versions: the same checks run on two torches, compared per root cause.

``python -m harness regress --torch A --torch B`` answers the question a
compiler engineer asks of a nightly: which recorded bugs did it fix, which
persist, which now fail another way, and what is new. Each environment is an
interpreter with its own torch; nothing of torch is imported here, every check
runs in a child process of that interpreter, because two torches cannot share
one process and a crashing repro must not take the command down.

Three sources of repros, each replayed standalone in both environments:

1. the known-issue baseline (each issue's script, rendered into the report's ``repros/``);
2. the findings of a campaign folder given with ``--campaign``;
3. the findings of one seeded campaign run in each environment.

A repro's exit status is its verdict on one torch (see ``reports/repro.py``):
1 reproduced (it also prints REPRODUCED), 0 not reproduced, 3 fails another
way, anything else (2, a signal, a timeout) an error. Findings are grouped by
root cause: the known issue they are, else their signature. A known issue's
verdict is its baseline repro's; the other forms a campaign found are listed
beside it, and a form that disagrees is said in a note.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from harness import warm
from reports import known_issues
from reports.html import render_regress_html
from reports.regression import campaign_summary

REPO = Path(__file__).resolve().parents[1]  # the repros and `-m harness` run from here (plugins import as in a campaign)
REPRO_TIMEOUT = 300.0  # seconds per repro: a compile on a slow CPU, far below a hang
JOBS = 2  # repros at a time in one environment: the campaign machine has 2 cores
CAMPAIGN_SLACK = 900.0  # seconds a campaign may run past its budget (startup, final reports) before it is killed
LABELS = ("A", "B")

# A repro's status in one environment, from its exit status.
REPRODUCED, NOT_REPRODUCED, DIFFERS, ERROR = "reproduced", "not-reproduced", "fails-differently", "error"
# The verdict of a root cause from A to B; "absent": reproduced in neither (see verdict()).
VERDICTS = ("fixed", "persisting", "changed", "new", "error", "absent")
_VERDICT = {
    (REPRODUCED, REPRODUCED): "persisting",
    (REPRODUCED, NOT_REPRODUCED): "fixed",
    (REPRODUCED, DIFFERS): "changed",
    (DIFFERS, REPRODUCED): "changed",
    (DIFFERS, DIFFERS): "changed",
    (DIFFERS, NOT_REPRODUCED): "fixed",
    (NOT_REPRODUCED, REPRODUCED): "new",
    (NOT_REPRODUCED, DIFFERS): "changed",
    (NOT_REPRODUCED, NOT_REPRODUCED): "absent",
}


# -- environments -----------------------------------------------------------------


@dataclass(frozen=True)
class Env:
    label: str  # "A" or "B"
    python: str  # the interpreter, absolute (a venv's bin/python is not resolved: the venv is the point)
    torch: str  # its torch.__version__
    python_version: str


def interpreter(spec: str) -> str:
    """The interpreter a ``--torch`` argument names: a folder is a venv (DIR/bin/python)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "bin" / "python"
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ValueError(f"--torch {spec}: no Python interpreter at {path}")
    return os.path.abspath(path)


def describe(label: str, spec: str) -> Env:
    """Ask the interpreter itself for its torch and Python versions (bad input: ValueError)."""
    python = interpreter(spec)
    code = "import platform, torch; print(torch.__version__); print(platform.python_version())"
    try:
        done = warm.run(["-c", code], python=python, timeout=120, cwd=REPO)  # this interpreter's: forked warm
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ValueError(f"--torch {spec}: {python} did not run ({e})") from None
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"--torch {spec}: {python} cannot import torch ({why})")
    return Env(label, python, lines[0], lines[1])


# -- repros and their replay ----------------------------------------------------------


@dataclass(frozen=True)
class Repro:
    """One repro.py to replay, and the root cause it belongs to."""

    root_cause: str  # a known issue's id, else the finding's signature
    title: str
    signature: str  # the finding's signature; a known issue's first pattern
    path: Path
    source: str  # "baseline", "campaign", "A campaign", "B campaign"
    hits: dict = field(default_factory=dict, compare=False)  # campaign source -> hits there


@dataclass(frozen=True)
class Replay:
    """What one repro did in one environment."""

    status: str  # REPRODUCED, NOT_REPRODUCED, DIFFERS or ERROR
    exit: Optional[int]  # None: timed out; negative: killed by that signal
    seconds: float
    detail: str  # the line that says what happened
    command: str  # what to run to see it again
    log: str  # stdout and stderr, in the report folder


def baseline(into: Path, root: Path = known_issues.ROOT) -> list[Repro]:
    """Every known issue's script, rendered into ``into`` (the report keeps what it ran); ``root`` is
    injectable so tests replay a fake baseline."""
    return [Repro(i.id, i.title, i.patterns[0] if i.patterns else "", i.write_script(into), "baseline")
            for i in known_issues.load(Path(root))]


def findings(folder: Path, source: str) -> list[Repro]:
    """The findings of a campaign folder as repros (ValueError when it is not a campaign folder)."""
    summary = campaign_summary(folder)
    if not isinstance(summary.get("findings"), list):
        raise ValueError(f"{folder}: not a campaign folder (its summary lists no findings)")
    return [Repro(f.get("known_issue") or f["signature"], (f.get("message") or "").strip().split("\n")[0],
                  f["signature"],
                  folder.resolve() / (f.get("folder") or "") / "repro.py", source, {source: f.get("count", 0)})
            for f in summary["findings"]]


def merge_findings(groups: list[list[Repro]]) -> list[Repro]:
    """One repro per signature (the first source's), with the hits of every source:
    a bug both campaigns hit is replayed once, not once per campaign."""
    kept: dict[str, Repro] = {}
    for repro in (r for group in groups for r in group):
        if repro.signature in kept:
            kept[repro.signature].hits.update(repro.hits)
        else:
            kept[repro.signature] = replace(repro, hits=dict(repro.hits))
    return list(kept.values())


def status(code: Optional[int], stdout: str) -> str:
    """The status an exit means. Exit 1 counts only with the repro's REPRODUCED
    line: an uncaught error before its check (torch 2.7 lacking
    nested_compile_region fails at import) also exits 1."""
    if code == 1 and "REPRODUCED" in stdout:
        return REPRODUCED
    return {0: NOT_REPRODUCED, 3: DIFFERS}.get(code, ERROR)


def _detail(code: Optional[int], stdout: str, stderr: str, timeout: float) -> str:
    """The one line that says what happened: the repro's verdict line, else why it did not get there."""
    if code is None:
        return f"timed out after {timeout:g} s"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    said = [line for line in stdout.splitlines()
            if line.startswith(("REPRODUCED", "FAILS DIFFERENTLY", "not reproduced", "ERROR"))]
    if said and not (code == 1 and not said[-1].startswith("REPRODUCED")):
        return said[-1]
    last = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
    return f"exit {code}: {last}"


def replay(env: Env, repro: Repro, log: Path, timeout: float = REPRO_TIMEOUT) -> Replay:
    """Run one repro standalone with the environment's interpreter, in its own
    session so a timeout kills what it started too; never raises for what the
    repro does."""
    argv = [env.python, str(repro.path)]
    started = time.time()
    stdout = stderr = ""
    code: Optional[int]
    try:
        with subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              errors="replace", start_new_session=True) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                code = None
    except OSError as e:
        code, stderr = 2, f"could not start: {e}"
    seconds = round(time.time() - started, 1)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ {shlex.join(argv)}\n# exit {code} after {seconds} s\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
    return Replay(status(code, stdout), code, seconds, _detail(code, stdout, stderr, timeout), shlex.join(argv),
                  str(log))


def replay_all(env: Env, repros: list[Repro], logs: Path, timeout: float = REPRO_TIMEOUT, jobs: int = JOBS,
               progress: Optional[Callable[[str], None]] = None) -> list[Replay]:
    """Every repro in one environment, ``jobs`` at a time, in the order given."""

    def one(item: tuple[int, Repro]) -> Replay:
        i, repro = item
        slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{repro.source}-{repro.root_cause}").strip("-")[:80]
        result = replay(env, repro, logs / f"{i:03d}-{slug}.log", timeout)
        if progress:
            progress(f"{env.label}: {repro.root_cause} ({repro.source}): {result.status} in {result.seconds} s")
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, enumerate(repros)))


# -- the seeded campaigns ------------------------------------------------------------


def run_campaign(env: Env, out: Path, budget: float, seed: int) -> dict:
    """The same seeded campaign in one environment, in a child process of its
    interpreter (one worker: the two environments share the machine). Returns
    what happened; a campaign that fails is reported, not raised."""
    out.mkdir(parents=True, exist_ok=True)
    argv = [env.python, "-m", "harness", "fuzz", "--budget", f"{budget:g}", "--seed", str(seed),
            "--out", str(out / "campaign"), "--workers", "1"]
    log = out / "campaign.log"
    try:
        with open(log, "w") as f:
            done = subprocess.run(argv, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, timeout=budget + CAMPAIGN_SLACK)
        code: Optional[int] = done.returncode
    except subprocess.TimeoutExpired:
        code = None
    summary = out / "campaign" / "summary.json"
    ok = code == 0 and summary.exists()
    last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
    return {"command": shlex.join(argv), "exit": code, "ok": ok, "folder": str(out / "campaign"), "log": str(log),
            "detail": "" if ok else (f"timed out after {budget + CAMPAIGN_SLACK:g} s" if code is None else last),
            "programs": json.loads(summary.read_text()).get("programs") if ok else None}


# -- verdicts ----------------------------------------------------------------------


def verdict(a: str, b: str, alike: bool = False) -> str:
    """A root cause's verdict from its status in A to its status in B.

    ``alike``: both runs said the same thing. A program failing the same other
    way on both torches (a bug recorded on an older torch, masked by another
    one on both) changed nothing from A to B: absent, not changed.
    """
    if ERROR in (a, b):
        return "error"
    if (a, b) == (DIFFERS, DIFFERS) and alike:
        return "absent"
    return _VERDICT[(a, b)]


def root_causes(repros: list[Repro], results: dict[str, list[Replay]],
                issues: dict[str, known_issues.KnownIssue]) -> list[dict]:
    """One entry per root cause, in first-seen order (the baseline first). A
    known issue's verdict is its baseline repro's; a root cause without one
    takes the most telling verdict of its repros (persisting over changed over
    new over fixed)."""
    grouped: dict[str, list[dict]] = {}
    for i, repro in enumerate(repros):
        a, b = results["A"][i], results["B"][i]
        grouped.setdefault(repro.root_cause, []).append({
            "source": repro.source, "signature": repro.signature, "title": repro.title, "repro": str(repro.path),
            "hits": dict(repro.hits), "A": asdict(a), "B": asdict(b),
            "verdict": verdict(a.status, b.status, alike=a.detail == b.detail)})
    order = ("persisting", "changed", "new", "fixed", "absent", "error")
    entries = []
    for cause, runs in grouped.items():
        primary = next((r for r in runs if r["source"] == "baseline"), None)
        chosen = primary["verdict"] if primary else min((r["verdict"] for r in runs), key=order.index)
        issue = issues.get(cause)
        disagree = [r for r in runs if r is not primary and r["verdict"] != chosen] if primary else []
        now = _now_known(primary, cause, issues) if primary and chosen == "changed" else None
        if now:  # its own failure is gone; the program now meets another recorded bug
            chosen = "fixed"
            disagree.append({"source": "baseline", "signature": f"its program now fails as {now}", "verdict": "fixed"})
        entries.append({
            "root_cause": cause, "known_issue": issue is not None,
            "title": issue.title if issue else runs[0]["title"],
            "verdict": chosen,
            "recorded": {"torch_seen": list(issue.torch_seen), "fixed_in": issue.fixed_in} if issue else None,
            "hits": _sum_hits(r["hits"] for r in runs),
            "note": "; ".join(f"{r['source']} form {r['signature']}: {r['verdict']}" for r in disagree),
            "repros": runs,
        })
    return entries


def _now_known(run: dict, cause: str, issues: dict[str, known_issues.KnownIssue]) -> Optional[str]:
    """The other known issue whose crash a repro now fails with in B (its
    'FAILS DIFFERENTLY ... got <crash>' line), if any: then the root cause is
    fixed and the program meets a recorded one (KI-007 on 2.15 hits KI-003)."""
    if run["A"]["status"] != REPRODUCED or run["B"]["status"] != DIFFERS:
        return None
    got = run["B"]["detail"].rpartition(", got ")[2]
    return next((i.id for i in issues.values() if i.id != cause and i.crash and got
                 and fnmatch.fnmatchcase(got, i.crash)), None)


def _sum_hits(hits) -> dict[str, int]:
    total: dict[str, int] = {}
    for h in hits:
        for source, n in h.items():
            total[source] = total.get(source, 0) + (n or 0)
    return total


def counts(entries: list[dict]) -> dict[str, int]:
    return {v: sum(1 for e in entries if e["verdict"] == v) for v in VERDICTS}


def top_line(c: dict[str, int]) -> str:
    line = (f"{c['fixed']} fixed, {c['persisting']} persisting, {c['changed']} changed, {c['new']} new, "
            f"{c['error']} errors")
    return line + (f" ({c['absent']} reproduced in neither)" if c.get("absent") else "")


# -- the command ---------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    torches: tuple[str, ...]  # two interpreters or venv folders
    out: Path
    campaign: Optional[Path] = None  # a campaign folder whose findings are replayed too
    budget: float = 120.0  # seconds of the seeded campaign in each environment; 0: none
    seed: int = 0
    timeout: float = REPRO_TIMEOUT
    jobs: int = JOBS
    root: Path = known_issues.ROOT  # the known-issue baseline to replay


def check(options: Options) -> tuple[list[Env], list[Repro]]:
    """Everything wrong with the input, as one ValueError before anything runs:
    the environments, and the findings of ``--campaign``."""
    if len(options.torches) != 2:
        raise ValueError(f"regress compares two environments: give --torch twice (got {len(options.torches)})")
    if options.budget < 0 or options.timeout <= 0 or options.jobs < 1:
        raise ValueError("--budget must be 0 or more, --timeout and --jobs positive")
    with ThreadPoolExecutor(len(options.torches)) as pool:  # each imports its torch: side by side
        envs = list(pool.map(describe, LABELS, options.torches))
    given = []
    if options.campaign is not None:
        if not Path(options.campaign).is_dir():
            raise ValueError(f"--campaign {options.campaign}: not a folder")
        given = findings(Path(options.campaign), "campaign")
    return envs, given


def run(options: Options, progress: Callable[[str], None] = lambda line: None) -> dict:
    """The whole comparison; writes regress.json, regress.md and regress.html into ``options.out``."""
    envs, given = check(options)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    for env in envs:  # a log left by an earlier run would read as this run's
        shutil.rmtree(out / env.label / "logs", ignore_errors=True)
    campaigns: dict[str, dict] = {}
    found: list[list[Repro]] = [given]
    if options.budget > 0:
        for env in envs:
            progress(f"{env.label}: seeded campaign, {options.budget:g} s on torch {env.torch}")
            campaigns[env.label] = run_campaign(env, out / env.label, options.budget, options.seed)
            if campaigns[env.label]["ok"]:
                found.append(findings(Path(campaigns[env.label]["folder"]), f"{env.label} campaign"))
    issues = {i.id: i for i in known_issues.load(Path(options.root))}
    repros = baseline(out / "repros", options.root) + merge_findings(found)
    results = {}
    for env in envs:
        progress(f"{env.label}: replaying {len(repros)} repros with {env.python} (torch {env.torch})")
        results[env.label] = replay_all(env, repros, out / env.label / "logs", options.timeout, options.jobs, progress)
    entries = root_causes(repros, results, issues)
    report = {
        "environments": {e.label: asdict(e) for e in envs},
        "campaign": str(Path(options.campaign).resolve()) if options.campaign else None,
        "seeded_campaigns": campaigns, "seed": options.seed, "budget": options.budget,
        "counts": counts(entries), "top_line": top_line(counts(entries)), "root_causes": entries,
    }
    (out / "regress.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "regress.md").write_text(markdown(report))
    (out / "regress.html").write_text(render_regress_html(report, MEANING))
    return report


# -- the report ----------------------------------------------------------------------

MEANING = {
    "fixed": "reproduces in A, not in B (or B's program now fails as another recorded bug)",
    "persisting": "reproduces in both",
    "changed": "the same program fails another way in B (exit 3) that no recorded bug names, or fails differently in A and B",
    "new": "reproduces in B only",
    "error": "a repro could not tell (exit 2, a crash before its check, a signal or a timeout)",
    "absent": "reproduces in neither (or fails the same other way in both)",
}


def _env_line(env: dict) -> str:
    return f"torch {env['torch']} (Python {env['python_version']}, `{env['python']}`)"


def _hits(hits: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in hits.items())


def markdown(report: dict) -> str:
    envs = report["environments"]
    lines = ["# Regressions across torch versions", "",
             f"- A: {_env_line(envs['A'])}", f"- B: {_env_line(envs['B'])}", ""]
    for label, c in report["seeded_campaigns"].items():
        state = f"{c['programs']} programs" if c["ok"] else f"**failed** ({c['detail']})"
        lines.append(f"- seeded campaign in {label}: {state}, `{c['folder']}` (seed {report['seed']}, "
                     f"{report['budget']:g} s)")
    if report.get("campaign"):
        lines.append(f"- findings replayed from `{report['campaign']}`")
    lines += ["", f"**{report['top_line']}** (per root cause)", ""]
    changes = [e for e in report["root_causes"] if e["verdict"] not in ("persisting", "absent")]
    if changes:
        lines += ["What differs from A to B:", ""]
        lines += [f"- **{e['verdict']}** {e['root_cause']}: {e['repros'][0]['B']['detail']}" for e in changes]
        lines.append("")
    lines += ["| root cause | verdict | A | B | recorded | campaign hits | title |", "|---|---|---|---|---|---|---|"]
    for e in report["root_causes"]:
        first = e["repros"][0]
        rec = e["recorded"]
        recorded = ("" if rec is None else f"seen {', '.join(rec['torch_seen'])}"
                    + (f"; fixed in {rec['fixed_in']}" if rec["fixed_in"] else ""))
        lines.append(f"| {e['root_cause'] if e['known_issue'] else '`' + e['root_cause'] + '`'} | **{e['verdict']}** | "
                     f"{first['A']['status']} | {first['B']['status']} | {recorded} | {_hits(e['hits'])} | "
                     f"{e['title'].replace('|', '/')[:120]} |")
    lines += ["", "## Repros", "", "Each replayed standalone in both environments; rerun with the command shown.", ""]
    for e in report["root_causes"]:
        lines += [f"### {e['root_cause']}: {e['verdict']}", ""]
        if e["note"]:
            lines += [f"Note: {e['note']}", ""]
        for r in e["repros"]:
            lines.append(f"- {r['source']} `{r['signature']}`: {r['verdict']}")
            for label in ("A", "B"):
                run_ = r[label]
                lines.append(f"  - {label}: {run_['status']} (exit {run_['exit']}, {run_['seconds']} s): "
                             f"{run_['detail']}  \n    `{run_['command']}`")
        lines.append("")
    lines += ["## Verdicts", ""] + [f"- **{v}**: {m}" for v, m in MEANING.items()]
    return "\n".join(lines) + "\n"
