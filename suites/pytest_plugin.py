"""The suites as a pytest plugin: ``--backend SPEC``, the suites' markers and
the known-issue summary, so a backend's own repository runs the suites with
``pytest --pyargs suites --backend NAME`` and no checkout of this one.

Registered as a ``pytest11`` entry point, it loads in every pytest run of an
environment that installs the harness, a backend's unrelated tests included:
so it imports no torch (nor any of the harness) at load time, claims
``--backend`` only when no conftest of the project claimed it first, and does
nothing unless asked. The harness is imported only to resolve a ``--backend``
that was given. In a run of these suites (and only there) pytest rewrites the
asserts of the suites alone, not of every module of every plugin's package.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

MARKERS = (
    "unit: fast self-tests of one part of the harness",
    "property: Hypothesis-driven fuzz suites through the real compiler",
    "inductor: uses the inductor backend (slow: builds C++)",
    "known_issue: regression tests for recorded torch bugs",
    "gpu: needs CUDA",
    "models: the model zoo (tiny transformers models; pytest suites/ -m models)",
    "backends: third-party backends (the backends extra); skips with a clear reason when absent",
    "long(seconds): takes more than suites/budget.py's TEST_SECONDS: its share of the gate, measured; "
    "scheduled first (suites/conftest.py)",
    "nightly: a long search rather than a check: runs in the nightly tier (make nightly), deselected from the CI gate",
    "shares(name): reads a cache other tests marked with the same name fill: scheduled on one xdist worker together",
)
BACKEND_HELP = ("run the property suites' programs on SPEC instead of their own backends, and the known "
                "issues recorded or known on SPEC (or on 'all'); SPEC is a backend name (built in, a "
                "dedup_harness.backends or torch_dynamo_backends entry point) or package.module:callable")

_chosen: str | None = None  # the --backend spec, checked at configure time
HITS_ENV = "DEDUP_HARNESS_KNOWN_HITS"  # the summary lines' folder, made by the first line written


def backend_under_test() -> str | None:
    """The ``--backend`` spec of this run; None: each suite runs its own backends."""
    return _chosen


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    if _runs_the_suites(early_config, args):
        _rewrite_tests_only(early_config)
    # After the project's own conftests: one that adds a --backend of its own
    # keeps it (theirs is parsed, the suites' is not offered), rather than
    # failing that project's unrelated runs with a clash of option names.
    result = yield
    if parser.parse_known_and_unknown_args(["--backend=?"])[1]:  # no one took it
        parser.getgroup("dedup-harness", "graph deduplication suites (dedup-harness)").addoption(
            "--backend", dest="dedup_backend", metavar="SPEC", default=None, help=BACKEND_HELP)
    return result


def _runs_the_suites(early_config, args) -> bool:
    """A run of these suites (``pytest suites/...`` here, ``--pyargs suites`` elsewhere), not a project's own."""
    here = Path(__file__).resolve().parent
    if Path(early_config.rootpath).resolve() == here.parent:
        return True
    return any(a == "suites" or a.startswith("suites.") or Path(a.split("::")[0]).resolve().is_relative_to(here)
               for a in args if not a.startswith("-"))


# What pytest rewrites the asserts of: test modules and conftests, and every module of a distribution that
# registers a pytest plugin (hypothesis, xdist, anyio and the harness itself: about 240 modules, 7 to 8 s of
# each xdist worker's collection where no rewritten bytecode is cached, as on a fresh clone). The harness's
# own asserts then run as in a campaign, unrewritten. Only the suites package keeps its rewriting.
KEEP_REWRITING = ("suites",)


def _rewrite_tests_only(early_config) -> None:
    hook = getattr(early_config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)  # pytest's set of marked names (feature detection)
    if not isinstance(marked, set):
        return
    marked.intersection_update({n for n in marked if n.split(".")[0] in KEEP_REWRITING})
    getattr(hook, "_marked_for_rewrite_cache", {}).clear()


def checked(spec: str):
    """``spec`` resolved to a ``harness.backends.Backend``; a bad one is pytest's
    one-line usage error, before anything is collected."""
    from harness.backends import BackendError, resolve

    try:
        return resolve(spec)
    except BackendError as e:
        raise pytest.UsageError(f"--backend: {e}") from None


def pytest_addoption(parser):
    parser.getgroup("dedup-harness", "graph deduplication suites (dedup-harness)").addoption(
        "--gate-budget", dest="gate_budget", metavar="SCALE", default=None,
        help="fail a test past its share of the CI gate's time and the run if a suite is past its figure "
             "(suites/budget.py), each times SCALE (1 on the machine they were measured on; 'auto': this "
             "machine's bare compile loop over that machine's, measured first)")
    parser.getgroup("dedup-harness").addoption(
        "--opinfo", dest="opinfo", metavar="OPS", default="",
        help="the op conformance suite's ops: 'all' (every op of torch's OpInfo database), or OP,OP,... "
             "(default: a sample of each family; the nested_compile_region half then runs too)")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist's controller hands its --gate-budget scale to each worker: one calibration, on a quiet machine."""
    scale = getattr(node.config, "dedup_gate_scale", None)
    if scale is not None:
        node.workerinput["dedup_gate_scale"] = scale


def pytest_configure(config):
    global _chosen
    if getattr(config.option, "gate_budget", None):
        from suites.budget import GateBudget, gate_scale

        given = getattr(config, "workerinput", {}).get("dedup_gate_scale")  # an xdist worker: the controller's
        scale, source = given if given else gate_scale(config.option.gate_budget)
        config.dedup_gate_scale = (scale, source)
        config.pluginmanager.register(GateBudget(scale, source), "dedup-gate-budget")
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    spec = getattr(config.option, "dedup_backend", None)
    if spec:
        checked(spec)
    _chosen = spec
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        os.environ[HITS_ENV] = os.path.join(tempfile.gettempdir(), f"dedup-known-hits-{uuid.uuid4().hex}")
        from harness.loader import own_program_dir

        own_program_dir()  # the run's programs, in one folder the workers inherit, removed at its end


def pytest_report_header(config):
    if _chosen:
        return (f"backend under test: {_chosen} (the property suites draw on it; the known issues recorded or "
                "known on it, or on 'all', are reproduced on it)")
    return None


# --- summary lines: xdist workers append, the controller prints them ---------
SUMMARY_SECTIONS = {
    "known": "known torch issues hit by the property suites",
    "cudagraphs": "CUDA graphs: engaged or not, with PyTorch's skip reasons (oracles.cudagraph)",
}


def record_line(section: str, *key: str) -> None:
    """Count one ``key`` under ``section`` of the summary (any xdist worker)."""
    folder = os.environ.get(HITS_ENV)
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps({"section": section, "key": list(key)}) + "\n")


def record_known_hit(issue_id: str, signature: str) -> None:
    record_line("known", issue_id, signature)


def pytest_terminal_summary(terminalreporter):
    folder = os.environ.get(HITS_ENV)
    if not folder or not os.path.isdir(folder) or hasattr(terminalreporter.config, "workerinput"):
        return
    lines: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path in Path(folder).glob("*.jsonl"):
        for line in path.read_text().splitlines():
            d = json.loads(line)
            lines[d["section"]][tuple(d["key"])] += 1
    for section, title in SUMMARY_SECTIONS.items():
        if lines[section]:
            terminalreporter.section(title)
            for key, n in sorted(lines[section].items()):
                terminalreporter.write_line(f"{n:5d}x " + "  ".join(key))


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput") and os.environ.get(HITS_ENV):
        shutil.rmtree(os.environ.pop(HITS_ENV), ignore_errors=True)
