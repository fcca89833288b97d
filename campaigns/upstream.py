"""``python -m harness report upstream``: run what a PyTorch bug report needs.

``reports.upstream`` renders the report and every script in it; this module
runs them, each in a child process of the interpreter asked for (the
strict repro, one per ablation row, the minimal repro, the regression test,
``collect_env``, a ``TORCH_TRACE`` run), and hands the results back to the
renderer. Children, because a crash or a second torch must not take this
process down, and because every script is meant to be run as a user runs it.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Optional

from harness import warm
from harness.execute import first_line
from reports import known_issues
from reports import upstream as render
from reports.signature import normalize

from .folder import ENV_FILE
from .regress import REPO, Env, _detail, describe, status

TIMEOUT = 600.0  # seconds per script: an inductor compile on this CPU, far below a hang
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Failed)\b")  # a traceback's last line
RESULTS = {"reproduced": "reproduces", "not-reproduced": "gone", "fails-differently": "fails differently",
           "error": "error"}


@dataclass(frozen=True)
class Ran:
    exit: Optional[int]  # None: timed out
    stdout: str
    stderr: str
    seconds: float

    def as_dict(self) -> dict:
        return {"exit": self.exit, "stdout": self.stdout, "stderr": self.stderr, "seconds": round(self.seconds, 1),
                "status": RESULTS[status(self.exit, self.stdout)]}


def run_script(text: str, python: str = sys.executable, timeout: float = TIMEOUT, env: Optional[dict] = None,
               name: str = "repro.py", args: tuple[str, ...] = ()) -> Ran:
    """Run a script as a user would: its own file and process (session), from
    the repository root so a plugin backend imports as in a campaign; never
    raises for what the script does."""
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        if python == sys.executable:  # forked warm (harness.warm) where that is the run a fresh process makes
            try:
                done = warm.run([str(path), *args], cwd=str(REPO), env={**os.environ, **(env or {})}, timeout=timeout)
            except subprocess.TimeoutExpired as e:
                return Ran(None, _text(e.stdout), _text(e.stderr), time.time() - started)
            return Ran(done.returncode, done.stdout, done.stderr, time.time() - started)
        try:
            with subprocess.Popen([python, str(path), *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, errors="replace", start_new_session=True,
                                  env={**os.environ, **(env or {})}) as proc:
                try:
                    out, err = proc.communicate(timeout=timeout)
                    code: Optional[int] = proc.returncode
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    out, err = proc.communicate()
                    code = None
        except OSError as e:
            return Ran(None, "", f"cannot run {python}: {e}", time.time() - started)
    return Ran(code, out, err, time.time() - started)


def _text(out) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else out or ""


# -- subjects ----------------------------------------------------------------------------


def subject(arg: str, model: bool = False) -> render.Subject:
    """What ``report upstream ARG`` is about: a known issue by id (``model``:
    the model issue of that id), a recorded issue's folder, or a campaign
    finding's folder (RUN/findings/<slug>). ValueError names what is wrong."""
    path = Path(arg)
    if path.is_dir():
        if (path / "meta.json").is_file() and (path / "program.json").is_file():
            return render.from_finding(path)
        if (path / "issue.json").is_file() and (path / "program.json").is_file():
            return render.from_known(next(i for i in known_issues.load(path.parent) if i.folder == path))
        if (path / "issue.json").is_file() and (path / "repro.py").is_file():
            return render.from_model(path)
        raise ValueError(f"{arg}: not a finding folder (meta.json, program.json) nor a recorded issue (issue.json)")
    if not re.fullmatch(r"KI-\d{3,}", arg):
        raise ValueError(f"{arg}: no such folder, and not an issue id (KI-NNN)")
    if not model:
        found = known_issues.by_id(arg)
        if found is not None:
            return render.from_known(found)
    folders = sorted(p.parent for p in known_issues.MODEL_ROOT.glob(f"{arg}-*/issue.json"))
    if folders:
        return render.from_model(folders[0])
    raise ValueError(f"{arg}: no such {'model ' if model else ''}issue in reports/known_issues or reports/model_issues")


# -- the ablation ---------------------------------------------------------------------------


def ablation(subject: render.Subject, python: str = sys.executable, fast: bool = False,
             only: Optional[tuple[str, ...]] = None, timeout: float = TIMEOUT,
             progress=lambda line: None) -> tuple[list[render.RowResult], dict]:
    """Each planned row run once (rows whose compile is another's take its
    result); ``only`` keeps the rows with these labels. Also returns the
    recorded row's run, the report's expected versus actual."""
    planned = [p for p in render.plan_ablation(subject, fast) if only is None or p.label in only]
    done: dict[str, render.RowResult] = {}
    recorded: dict = {}
    rows = []
    for p in planned:
        if p.skipped:
            rows.append(render.RowResult(p.label, "skipped", p.skipped))
            continue
        if p.same_as:
            if p.same_as not in done:  # its twin was left out by ``only``
                rows.append(render.RowResult(p.label, "not run", f'the same compile as "{p.same_as}"'))
                continue
            first = done[p.same_as]
            rows.append(render.RowResult(p.label, first.result, f'the same compile as "{p.same_as}"', None))
            continue
        progress(f"  ablation: {p.label} ...")
        ran = run_script(p.script, python, timeout, name="ablation.py")
        row = render.RowResult(p.label, RESULTS[status(ran.exit, ran.stdout)],
                               _detail(ran.exit, ran.stdout, ran.stderr, timeout), round(ran.seconds, 1))
        if subject.kind == "crash" and subject.program is None and row.result == "reproduces" and recorded \
                and _crash(row.detail) != _crash(_detail(recorded["exit"], recorded["stdout"], recorded["stderr"], timeout)):
            row = render.RowResult(row.label, "fails differently", row.detail, row.seconds)
        progress(f"  ablation: {p.label}: {row.result} ({row.seconds} s)")
        done[p.label] = row
        rows.append(row)
        if p.label == render.ROWS[0].label:
            recorded = ran.as_dict()
    return rows, recorded


def _crash(line: str) -> str:
    """The error a model issue's REPRODUCED line names: its hand-written
    repro says REPRODUCED for any crash, so a row is told apart by this."""
    return normalize(line.partition("): ")[2])[:60]


# -- the regression test ---------------------------------------------------------------------

# Runs one test file's TestCases with a result that keeps why an expected
# failure failed, so a test that fails for another reason is told apart.
_CHECKER = '''
import importlib.util, json, sys, unittest, traceback

{first_line}


class Result(unittest.TestResult):
    outcomes = []

    def _keep(self, outcome, test, err=None):
        why = "" if err is None else f"{{err[0].__qualname__}}: {{first_line(err[1])}}"
        tail = "" if err is None else "".join(traceback.format_exception(*err))[-3000:]
        self.outcomes.append({{"test": test.id(), "outcome": outcome, "why": why, "traceback": tail}})

    def addSuccess(self, test): self._keep("passed", test)
    def addFailure(self, test, err): self._keep("failed", test, err)
    def addError(self, test, err): self._keep("error", test, err)
    def addSkip(self, test, reason): self.outcomes.append({{"test": test.id(), "outcome": "skipped", "why": reason}})
    def addExpectedFailure(self, test, err): self._keep("expected failure", test, err)
    def addUnexpectedSuccess(self, test): self._keep("unexpected success", test)


spec = importlib.util.spec_from_file_location("snippet", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
result = Result()
unittest.defaultTestLoader.loadTestsFromModule(module).run(result)
print("@@RESULT " + json.dumps(result.outcomes))
'''


def check_snippet(subject: render.Subject, text: str, python: str = sys.executable,
                  timeout: float = TIMEOUT) -> dict:
    """Run the regression test with ``python``: {"result", "detail"}.
    "expected failure": it fails as the bug does (the crash the issue is, or
    an assertion for wrong values: the bug lives); "unexpected success": it
    passes (the bug is fixed there: remove the decorator); "expected
    failure, but differently": it fails for another reason; "skipped";
    "error": the test could not run."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / render.snippet_name(subject)
        path.write_text(text)
        checker = _CHECKER.format(first_line=inspect.getsource(first_line).strip())
        ran = run_script(checker, python, timeout, name="check_snippet.py", args=(str(path),))
    line = next((l for l in ran.stdout.splitlines() if l.startswith("@@RESULT ")), None)
    if line is None:
        return {"result": "error", "detail": _detail(ran.exit, ran.stdout, ran.stderr, timeout), "seconds": round(ran.seconds, 1)}
    outcomes = json.loads(line.removeprefix("@@RESULT "))
    if not outcomes:
        return {"result": "error", "detail": "no test ran", "seconds": round(ran.seconds, 1)}
    o = outcomes[0]
    result, detail = o["outcome"], o.get("why", "")
    if result == "expected failure" and not _as_the_bug(subject, detail, o.get("traceback", "")):
        result = "expected failure, but differently"
    if result == "unexpected success":
        detail = "the test passes: the bug is fixed here; remove @unittest.expectedFailure"
    return {"result": result, "detail": detail, "seconds": round(ran.seconds, 1)}


def _as_the_bug(subject: render.Subject, why: str, tail: str) -> bool:
    """Whether a failure is the issue's own: its crash, else the failed
    comparison (an embedded strict repro: exit 1, REPRODUCED)."""
    if not (subject.program is not None and subject.check in render.MINIMAL_DRIVERS):
        return why.startswith("AssertionError") and "exit 1: " in tail and "REPRODUCED" in tail
    if subject.expect_crash:
        return fnmatchcase(normalize(why), subject.expect_crash)
    return why.startswith("AssertionError")


# -- collect_env and the trace -----------------------------------------------------------------


def collect_env(python: str = sys.executable, timeout: float = 300.0) -> str:
    """``python -m torch.utils.collect_env``'s output (what PyTorch's template asks for); for this
    interpreter, asked in this process (whose torch is imported), not a new one."""
    if python == sys.executable:
        try:
            from torch.utils.collect_env import get_pretty_env_info

            return f"Collecting environment information...\n{get_pretty_env_info()}".strip()
        except Exception as e:  # noqa: BLE001 - what it cannot collect is said, not raised
            return f"collect_env did not run: {type(e).__name__}: {e}"
    try:
        done = subprocess.run([python, "-m", "torch.utils.collect_env"], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"collect_env did not run: {e}"
    return done.stdout.strip() or done.stderr.strip()


class EnvCapture:
    """A campaign's ``collect_env.txt``, captured once in the background
    while the campaign runs (kept on --resume)."""

    def __init__(self, out: Path):
        self.path = out / ENV_FILE
        self.thread = None
        if not self.path.exists():
            self.thread = threading.Thread(target=lambda: self.path.write_text(collect_env() + "\n"), daemon=True)
            self.thread.start()

    def wait(self, timeout: float = 120.0) -> None:
        if self.thread is not None:
            self.thread.join(timeout)


def trace(text: str, folder: Path, python: str = sys.executable, timeout: float = TIMEOUT) -> dict:
    """Run a repro under ``TORCH_TRACE=folder``: the files it wrote, to attach."""
    folder.mkdir(parents=True, exist_ok=True)
    ran = run_script(text, python, timeout, env={"TORCH_TRACE": str(folder.resolve())}, name="traced.py")
    files = sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*") if p.is_file())
    return {"dir": str(folder), "files": files, "status": f"exit {ran.exit}" if ran.exit is not None else "timed out"}


# -- the report ------------------------------------------------------------------------------------


def minimal_status(ran: dict) -> str:
    """What the minimal repro did: passes (exit 0), or the error it raised."""
    if ran["exit"] == 0:
        return "passes"
    if ran["exit"] is None:
        return "timed out"
    raised = [l for l in ran["stderr"].splitlines() if EXCEPTION_LINE.match(l)]
    return f"fails: {(raised[-1] if raised else 'exit ' + str(ran['exit']))[:160]}"


def report(subject: render.Subject, out: Path, *, run: bool = True, ablate: bool = True, fast: bool = False,
           torches: tuple[Env, ...] = (), want_trace: bool = False, timeout: float = TIMEOUT,
           env_file: Optional[Path] = None, command: str = "", progress=lambda line: None) -> Path:
    """Write ``issue.md`` and the regression test into ``out``; with
    ``run``, first run the strict repro (or the ablation, whose first row it
    is), the minimal repro and the regression test here and with each of
    ``torches`` (``campaigns.regress.describe``), collect_env (from ``env_file`` when given: a campaign's),
    and with ``want_trace`` a TORCH_TRACE run."""
    out.mkdir(parents=True, exist_ok=True)
    snippet = render.test_snippet(subject)
    minimal = render.minimal_repro(subject)
    (out / render.snippet_name(subject)).write_text(snippet)
    if minimal:
        (out / "minimal_repro.py").write_text(minimal)
    results = render.Results(command=command)
    if not run:
        results.ablation_note = "Not computed (rendered without running): `" + render.report_command(subject) + "` runs it."
        results.collect_env_note = _env_note(env_file)
        (out / "issue.md").write_text(render.render_issue(subject, results))
        return out / "issue.md"
    import platform

    import torch

    here = Env("A", sys.executable, torch.__version__, platform.python_version())
    results.torch = here.torch
    if ablate:
        progress(f"{subject.id}: ablation on torch {here.torch}")
        results.ablation, results.strict = ablation(subject, fast=fast, timeout=timeout, progress=progress)
    else:
        results.ablation_note = "Not computed (--no-ablation)."
        results.strict = run_script(subject.strict, timeout=timeout).as_dict()
    progress(f"{subject.id}: regression test and minimal repro on torch {here.torch}")
    results.snippet = check_snippet(subject, snippet, timeout=timeout)
    if minimal:
        results.minimal = run_script(minimal, timeout=timeout, name="minimal_repro.py").as_dict()
    results.versions = [_version(here.torch, here.python, results.strict, results.minimal, results.snippet)]
    for env in torches:
        progress(f"{subject.id}: strict repro, minimal repro and regression test on torch {env.torch} ({env.python})")
        strict = run_script(subject.strict, env.python, timeout).as_dict()
        ran = run_script(minimal, env.python, timeout, name="minimal_repro.py").as_dict() if minimal else None
        results.versions.append(_version(env.torch, env.python, strict, ran,
                                         check_snippet(subject, snippet, env.python, timeout)))
    if env_file is not None and env_file.exists():
        results.collect_env = env_file.read_text()
    else:
        results.collect_env = collect_env()
        (out / ENV_FILE).write_text(results.collect_env + "\n")
    if want_trace:
        progress(f"{subject.id}: TORCH_TRACE run")
        results.trace = trace(minimal or subject.strict, out / "trace", timeout=timeout)
    (out / "issue.md").write_text(render.render_issue(subject, results))
    (out / "results.json").write_text(json.dumps(asdict(results), indent=2, default=str) + "\n")
    return out / "issue.md"


def _version(torch: str, python: str, strict: dict, minimal: Optional[dict], snippet: dict) -> dict:
    shown = "(the strict repro)" if minimal is None else minimal_status(minimal)
    return {"torch": torch, "python": python, "repro": strict["status"], "minimal": shown, "snippet": snippet["result"]}


def _env_note(env_file: Optional[Path]) -> str:
    if env_file is not None:
        return f"`python -m torch.utils.collect_env`: captured once per campaign in `{env_file}`."
    return "`python -m torch.utils.collect_env`: not captured (rendered without running)."


# -- campaign findings ---------------------------------------------------------------------------


def describe_finding(folder: Path, run: Path) -> None:
    """A campaign finding's folder gets issue.md and its regression test,
    rendered without running anything (a row of the ablation costs a fresh
    torch import and a compile, seconds each on aot_eager and minutes on
    inductor: computed on request)."""
    try:
        report(render.from_finding(folder), folder, run=False, env_file=run / ENV_FILE)
    except Exception as e:  # a report is never worth a campaign: say why, go on
        (folder / "issue.md").write_text(f"issue.md not rendered: {type(e).__name__}: {e}\n")


def main(args) -> int:
    """``report upstream``: bad input is a ValueError (one line, exit 2)."""
    if args.timeout <= 0:
        raise ValueError(f"--timeout {args.timeout:g}: expected seconds > 0")
    s = subject(args.target, model=args.model)
    torches = tuple(describe("B", spec) for spec in args.torch)  # a bad interpreter fails before anything runs
    default = Path(s.origin) if s.finding else Path("runs/upstream") / s.slug
    out = args.out or default
    run_folder = Path(s.origin).parents[1] if s.finding else None
    env_file = run_folder / ENV_FILE if run_folder is not None and (run_folder / ENV_FILE).exists() else None
    flags = [f for f, on in (("--model", args.model), ("--no-ablation", args.no_ablation), ("--fast", args.fast),
                             ("--trace", args.trace)) if on] + [f"--torch {t}" for t in args.torch]
    command = " ".join(["python -m harness report upstream", args.target, *flags])
    path = report(s, out, run=not args.no_run, ablate=not args.no_ablation, fast=args.fast, torches=torches,
                  want_trace=args.trace, timeout=args.timeout, env_file=env_file, command=command,
                  progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"wrote {path} and {path.parent / render.snippet_name(s)}")
    return 0
