"""The known-issues baseline: torch bugs the harness has found and recorded.

Each issue is a folder under ``reports/known_issues/`` holding ``issue.json``
(id, title, signature patterns, the backend it shows on, links to the code,
where it stands upstream) and ``program.json`` (a minimal program): data. Its
standalone script follows from them and is rendered when asked (``render``,
``dedup-harness report repro KI-NNN``), never committed. Suites consult it so
CI stays green on a recorded bug, and its regression tests fail loudly, like
``xfail(strict=True)``, when a bug stops reproducing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

from generators.ir import Program
from generators.settings import SETTINGS

from .signature import matches

ROOT = Path(__file__).parent / "known_issues"
# A signature a known issue matches in a run lacking one of its triggers (reports.triggers.claimed) starts
# "unexplained:<issue>:": no issue's.
UNEXPLAINED = "unexplained"
# Settings that change only where Dynamo breaks the graph (generators.settings.Setting.moves_breaks): a known
# failure a program meets once one of them keeps more in the graph is that failure still.
MOVES_BREAKS = frozenset(n for n, s in SETTINGS.items() if s.moves_breaks)


def _breaks_moved(signature: str) -> str:
    """``signature`` without the settings that only move graph breaks (its ``settings=`` tag dropped if none
    is left)."""
    def kept(m: re.Match) -> str:
        names = [n for n in m.group(1).split("+") if n not in MOVES_BREAKS]
        return f":settings={'+'.join(names)}" if names else ""

    return re.sub(r":settings=([^:]*)", kept, signature)


def _installed(version: Optional[str]) -> str:
    """``version``, or the installed torch's when None."""
    if version is None:
        import torch

        version = torch.__version__
    return version


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a torch version: "2.15.0+cu132" -> (2, 15, 0).

    The local part (+cpu, +cu126) names a build of the same release, and a
    nightly's suffix (.dev20250101, a0+git...) follows the release it leads
    to, so only the leading numbers count when comparing with ``fixed_in``.
    """
    found = re.match(r"\d+(\.\d+)*", version.strip())
    if not found:
        raise ValueError(f"torch version {version!r}: expected a release such as 2.15.0")
    return tuple(int(n) for n in found.group().split("."))


@dataclass(frozen=True)
class KnownIssue:
    id: str
    title: str
    patterns: tuple[str, ...]  # fnmatch patterns over finding signatures
    backend: str
    description: str
    code: tuple[str, ...]  # where in torch the bug lives
    folder: Path
    repro: str = "differential"  # what repro.py checks (reports.repro.DRIVERS)
    variant: Optional[dict] = None  # the change a "guard" repro makes (generators.variants.Variant)
    dedup: bool = True  # whether the repro compiles with graph deduplication
    # What the bug needs, each taken away alone enough to avoid it ("dedup":
    # the pass, "compile_region": the decorator, "mutation": in-place writes,
    # ...: reports.triggers.TRIGGERS; "a|b": one of the two). A run that meets
    # it is judged again without each (reports.unmask), so one known crash
    # hides no other bug; a failure matching it in a run without one is not
    # it (reports.triggers.claimed), so it claims only what it explains.
    triggers: tuple[str, ...] = ()
    # The backends it is known on; empty: any. A broad signature (a wrong
    # gradient) stays new on every other backend.
    backends: tuple[str, ...] = ()
    # How its program runs (harness.backend_capabilities): train, or forward-only
    # on an inference-only backend; and the precision the backend computed in.
    mode: str = "train"
    precision: tuple[tuple[str, str], ...] = ()
    # The crash the bug is: a glob over its normalized "Type: message"; None:
    # wrong values. Its repro exits 3 when the program fails another way.
    crash: Optional[str] = None
    # The torch releases it was seen to reproduce on, and the first one it was
    # seen fixed on (None: not fixed yet): what the regression suite expects.
    torch_seen: tuple[str, ...] = ()
    fixed_in: Optional[str] = None
    # Where it stands upstream: the PyTorch issues and PRs about it (none:
    # unfiled), and "open", "by design" or "fixed in <release>".
    upstream: tuple[str, ...] = ()
    status: str = "open"
    # The search of PyTorch's tracker that says so: (query, verdict).
    upstream_search: tuple[str, str] = ("", "")
    # What its strict repro did per torch release, from an actual run (``regress``): (release, status).
    releases: tuple[tuple[str, str], ...] = ()
    # What of the machine it also depends on (a C++ toolchain, a CPU's vector units): where its program
    # passes, the suites say so and do not take it for fixed.
    machine: str = ""
    # A CUDA-graph issue's calls (repro "replay"): the plan (generators.replays.ReplayPlan) and the device.
    replay: Optional[dict] = None

    def fixed_on(self, version: Optional[str] = None) -> bool:
        """Whether the bug is recorded fixed on torch ``version`` (default: the
        installed one): its release is ``fixed_in`` or later, so the suites
        expect the program to pass (or fail another way) instead of reproducing."""
        return self.fixed_in is not None and release(_installed(version)) >= release(self.fixed_in)

    def before_seen(self, version: Optional[str] = None) -> bool:
        """Whether torch ``version`` predates every release the bug was seen
        on: introduced later, or masked there by another bug, it is not
        expected to reproduce (and not recorded fixed either)."""
        return bool(self.torch_seen) and release(_installed(version)) < min(release(v) for v in self.torch_seen)

    def needs(self) -> tuple[str, ...]:
        """The capabilities (``harness.capabilities``) its program cannot run
        without: on a torch lacking one it is unavailable, neither reproduced
        nor fixed (torch 2.7 has no nested_compile_region to decorate with)."""
        needed = ["graph_deduplication"] if self.dedup else []
        program = self.program()
        if any(b.compile_region for b in program.blocks()):
            needed.append("nested_compile_region")
        if program.options.door:  # reached through a door (generators.doors) this torch may lack
            needed.append(f"door:{program.options.door}")
        if self.repro == "replay" and str((self.replay or {}).get("device", "cuda")).startswith("cuda"):
            needed.append("cuda")
        return tuple(needed)

    @property
    def expect_crash(self) -> Optional[str]:
        """What a strict repro (differential, guard; toggle: crash or values) must see; None: any failure."""
        if self.repro in ("toggle", "rewrite"):
            return "" if self.crash is None else "*"
        if self.repro not in ("differential", "guard", "door"):
            return None
        return "" if self.crash is None else self.crash

    def render(self) -> str:
        """Its standalone repro script, as rendered from program.json (a hand-written ``repro.py`` in its
        folder, where one is kept, is the script instead)."""
        own = self.folder / "repro.py"
        if own.is_file():
            return own.read_text()
        from harness.outcome import RunConfig

        from .repro import render_repro

        return render_repro(self.program(), self.config(RunConfig), f"{self.id}: {self.title}", self.repro,
                            self.variant, replay=self.replay, expect_crash=self.expect_crash)

    @property
    def minimal(self) -> Optional[str]:
        """Its hand-cut torch-only repro (``minimal.py``), where the rendered short form is longer than the bug
        needs or cannot express it (``reports.upstream.minimal_repro``); None: none kept."""
        path = self.folder / "minimal.py"
        return path.read_text() if path.is_file() else None

    def write_script(self, directory: Path) -> Path:
        """Its standalone script, rendered into ``directory`` as ``<id>.py`` (to run, or to hand on)."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.id}.py"
        path.write_text(self.render())
        return path

    def config(self, make):
        """The run it was found in, as ``make`` (RunConfig) builds it."""
        return make(backend=self.backend, dedup=self.dedup, mode=self.mode, precision=self.precision)

    @property
    def third_party(self) -> bool:
        """Found on a backend that is not torch's own: its repro needs that backend installed."""
        from harness.backends import BUILTIN

        return self.backend not in BUILTIN

    def matches(self, signature: str) -> bool:
        """``unexplained:<issue>:...``: a failure in a run without one of an issue's triggers, no issue's."""
        return not signature.startswith(f"{UNEXPLAINED}:") and (
            matches(signature, self.patterns) or matches(_breaks_moved(signature), self.patterns))

    def program(self) -> Program:
        return Program.from_json((self.folder / "program.json").read_text())


STATUSES = ("open", "by design", "fixed in ")  # the last one followed by the release


def _links(upstream) -> tuple[str, ...]:
    return () if upstream == "unfiled" else tuple(upstream)


def by_id(issue_id: Optional[str], root: Path = ROOT) -> Optional[KnownIssue]:
    """The recorded issue of that id (None: no such issue)."""
    return next((i for i in load(root) if i.id == issue_id), None)


def upstream_line(issue_id: str) -> dict:
    """What a report says of a known issue met (the program or model
    baseline's record): its title, status and upstream links."""
    found = by_id(issue_id)
    if found is not None:
        return {"id": issue_id, "title": found.title, "status": found.status, "upstream": list(found.upstream)}
    model = next((m for m in model_issues() if m["id"] == issue_id), {})
    return {"id": issue_id, "title": model.get("title", ""), "status": model.get("status", "open"),
            "upstream": list(_links(model.get("upstream", "unfiled")))}


def known_met(findings: list[dict]) -> list[dict]:
    """The known issues a report's findings met, each with where it stands upstream."""
    return [upstream_line(i) for i in sorted({f["known_issue"] for f in findings if f.get("known_issue")})]


@lru_cache(maxsize=None)
def load(root: Path = ROOT) -> tuple[KnownIssue, ...]:
    issues = []
    for path in sorted(root.glob("*/issue.json")):
        d = json.loads(path.read_text())
        issues.append(
            KnownIssue(
                id=d["id"],
                title=d["title"],
                patterns=tuple(d["patterns"]),
                backend=d["backend"],
                description=d["description"],
                code=tuple(d.get("code", ())),
                folder=path.parent,
                repro=d.get("repro", "differential"),
                variant=d.get("variant"),
                dedup=d.get("dedup", True),
                triggers=tuple(d.get("triggers", ())),
                backends=tuple(d.get("backends", ())),
                mode=d.get("mode", "train"),
                precision=tuple(tuple(p) for p in d.get("precision", ())),
                crash=d.get("crash"),
                torch_seen=tuple(d.get("torch_seen", ())),
                fixed_in=d.get("fixed_in"),
                upstream=_links(d.get("upstream", "unfiled")),
                status=d.get("status", "open"),
                upstream_search=(d.get("upstream_search", {}).get("query", ""),
                                 d.get("upstream_search", {}).get("verdict", "")),
                releases=tuple(d.get("releases", {}).items()),
                machine=d.get("machine", ""),
                replay=d.get("replay"),
            )
        )
    return tuple(issues)


def match(signature: str, backend: Optional[str] = None) -> Optional[KnownIssue]:
    """The known issue a signature (seen on ``backend``; None: any) is. A
    backend named ``<planted Dynamo fault>__<backend>`` (suites.planted_pass)
    is that backend with a fault in Dynamo: its backend-scoped issues hold."""
    return next(iter(matching(signature, backend)), None)


def matching(signature: str, backend: Optional[str] = None) -> list[KnownIssue]:
    """Every known issue a signature matches, in baseline order (``match`` is the first; triage keeps the
    first whose triggers the run has: reports.triggers.claimed)."""
    base = backend.rsplit("__", 1)[-1] if backend and "__" in backend else backend
    return [i for i in load() if i.matches(signature) and (not i.backends or base is None or base in i.backends)]


OP_EXPECTED = ROOT / "op_expected.json"


def op_expected(backend: Optional[str] = None) -> dict[str, str]:
    """OpInfo cells (``op|spelling|dtype``) recorded as failing -> why (a known issue's id where one explains
    it): those of ``backend`` and of every backend ("*"); ``backend`` None: of any backend."""
    data = json.loads(OP_EXPECTED.read_text()) if OP_EXPECTED.exists() else {}
    tables = [v for k, v in data.items() if isinstance(v, dict) and (backend is None or k in ("*", backend))]
    return {cell: why for table in tables for cell, why in table.items()}


def crash_issue(message: str) -> Optional[KnownIssue]:
    """The known crash a "Type: message" is, by the issues' ``crash`` globs
    (no triage: what a first compile's error says, for ``stats``)."""
    import fnmatch

    from .signature import normalize

    text = normalize(message)
    return next((i for i in load() if i.crash and fnmatch.fnmatchcase(text, i.crash + "*")), None)


def record(
    folder_name: str,
    issue: dict,
    program: Program,
    root: Path = ROOT,
) -> Path:
    """Write a known issue's folder: issue.json and program.json (its script is rendered from them).

    ``issue`` holds id, title, patterns, backend, description and code.
    """
    from generators.ir import to_dict

    folder = root / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "issue.json").write_text(json.dumps(issue, indent=2) + "\n")
    (folder / "program.json").write_text(json.dumps(to_dict(program), indent=2, sort_keys=True) + "\n")
    load.cache_clear()
    return folder


# Known issues found on models (python -m harness check / zoo): issue.json
# with patterns and a standalone repro.py that needs the model's package.
MODEL_ROOT = Path(__file__).parent / "model_issues"


@lru_cache(maxsize=1)
def model_issues() -> tuple[dict, ...]:
    return tuple(json.loads(p.read_text()) for p in sorted(MODEL_ROOT.glob("*/issue.json")))


def known_model_issue(signature: str, model: str = "", backend: str = "") -> str | None:
    """The id of a known issue found on a model (``reports/model_issues``:
    issue.json with patterns, and a standalone repro.py) that names
    ``signature``. An issue with ``models`` (factory patterns) names only
    those models' findings: a model where a known bug shows as a plain
    mismatch must not make every model's mismatch known; one with a
    ``backend`` other than "all", only that backend's."""
    for issue in model_issues():
        if issue.get("models") and not matches(model, issue["models"]):
            continue
        if backend and issue.get("backend", "all") not in ("all", backend):
            continue
        if matches(signature, issue["patterns"]):
            return issue["id"]
    return None
