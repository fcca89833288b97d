"""Regression tests for recorded torch bugs, in the manner of xfail(strict=True).

Each known issue's minimal program must still fail with a signature the issue
claims. When torch fixes the bug the test fails with "appears fixed", telling
whoever upgraded torch to record the release in the issue's ``fixed_in``. On a
torch at or past ``fixed_in`` the expectation turns around: the program must
no longer fail with the issue's signature and its repro must not exit 1, so a
fix that is undone fails loudly too. An issue whose program needs what the
installed torch lacks (``harness.capabilities``) is skipped, never judged.
With ``--backend SPEC`` (``suites/pytest_plugin.py``) the issues recorded or
known on SPEC, and the torch-wide ones (recorded on "all"), are reproduced on
SPEC; the rest, recorded on another backend, are not collected.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

import torch

from harness import capabilities
from harness.backend_capabilities import runs_probe
from harness.backends import BackendError, resolve
from harness.doors import run_door
from harness.outcome import RunConfig
from generators.variants import change_key
from harness.pipeline import run_program
from oracles.registry import ORACLES, judge, judge_door, run_config
from reports import known_issues
from reports.known_issues import MODEL_ROOT, ROOT, load, release
from reports.door_triage import triage_door
from reports.triage import triage, triage_replay
from generators.replays import ReplayPlan
from harness.replay import run_replay
from oracles import cudagraph
from suites.pytest_plugin import backend_under_test
from harness import warm

pytestmark = pytest.mark.known_issue
ISSUES = load()
CHOSEN = backend_under_test()
# The issues this run reproduces, on the backend each runs on: with --backend,
# those recorded on it or known on it (``backends``), and the torch-wide ones.
ON = {i.id: CHOSEN or i.backend for i in ISSUES
      if CHOSEN is None or i.backend in (CHOSEN, "all") or CHOSEN in i.backends}
# Issues fixed in the installed torch run their program and repro in the
# nightly tier (and ``regress``): the gate checks the live ones, whose repros
# a harness change can break; a fixed bug coming back is a torch regression.
# A third-party backend's issues are reproduced in-process in the nightly tier
# too: a runtime may carry one issue's crash into the next issue's run in the
# same process (iree-turbine's does); the gate runs their standalone repros,
# each in a fresh process, by the share below.
# An issue whose standalone repro runs in the gate (below) is reproduced in-process, its signature named by
# triage, in the nightly tier: the gate's standalone run already fails when the bug stops reproducing.
def _number(issue) -> int:
    return int(issue.id.split("-")[1])


def _repro_in_gate(issue) -> bool:
    return (ON.get(issue.id) == issue.backend and not issue.fixed_on(torch.__version__)
            and _number(issue) % REPRO_SHARE == 0)


# Each standalone repro is its own Python process (torch imported anew, 3-5 s):
# the gate runs one live issue's in REPRO_SHARE, by number, and the in-process
# reproduction of every other one; the nightly tier runs them all. Every script is
# rendered anew for its run, so a template change that breaks repros breaks the
# sampled ones too.
REPRO_SHARE = 8  # 4 until issue 42's cut to six minutes
# Issues whose run takes far more than a test's share (their program offers many changed calls, each
# re-made): checked in the nightly tier, where their run fits (KI-119: 45 s then; the gate is at its six minutes).
SLOW = {"KI-119": 50}  # 25 s on a machine whose gate takes 726 s (the bare loop 0.55 s a program)
# Of the other live issues the gate reproduces those numbered 1 modulo REPRO_SHARE in process (issue 42's cut to
# six minutes: 85 test-seconds for all of them on a machine whose bare loop is 0.34 s a program), and the first
# issue of each oracle the shares leave without one (its first pattern's); the rest run nightly. On the pinned
# torch a reproduction changes only with the harness, through the oracle that names it.
def _oracle(issue) -> str:
    return issue.patterns[0].split(":")[0] if issue.patterns else ""


def _by_oracle() -> set[str]:
    live = [i for i in ISSUES if ON.get(i.id) == i.backend and not i.fixed_on(torch.__version__)
            and not i.third_party and i.id not in SLOW]
    shared = {_oracle(i) for i in live if _repro_in_gate(i) or _number(i) % REPRO_SHARE == 1}
    first: dict[str, str] = {}
    for issue in sorted(live, key=_number):
        first.setdefault(_oracle(issue), issue.id)
    return {ki for oracle, ki in first.items() if oracle not in shared}


BY_ORACLE = _by_oracle()


def _in_process_in_gate(issue) -> bool:
    return _number(issue) % REPRO_SHARE == 1 or issue.id in BY_ORACLE


RUN = [pytest.param(i, id=i.id, marks=pytest.mark.nightly if i.fixed_on(torch.__version__) or i.third_party
                    or _repro_in_gate(i) or i.id in SLOW or not _in_process_in_gate(i) else ())
       for i in ISSUES if i.id in ON]
# A repro runs the backend it was rendered with: only those recorded on the chosen one.
REPROS = [pytest.param(i, id=i.id, marks=() if _repro_in_gate(i) else pytest.mark.nightly)
          for i in ISSUES if ON.get(i.id) == i.backend]


def _skip_if_unavailable(issue) -> None:
    """A program this torch cannot run tells nothing about the bug: skip it,
    saying what is missing; so does a torch older than every release the bug
    was seen on (introduced later, or masked there by another)."""
    missing = [n for n in issue.needs() if not capabilities.has(n)]
    if missing:
        pytest.skip(f"{issue.id} unavailable here (torch {torch.__version__}): its program needs "
                    + "; ".join(capabilities.BY_NAME[n].lost for n in missing))
    if issue.before_seen():
        pytest.skip(f"{issue.id} not expected on torch {torch.__version__}: first seen on "
                    f"{min(issue.torch_seen, key=release)}")
    _skip_if_backend_absent(issue)


def _skip_if_backend_absent(issue, runs: bool = True) -> None:
    """A third-party backend's issue is judged where that backend is installed;
    before a run (``runs``), a call the backend must run takes whatever failure
    an earlier issue's crash left pending in its runtime (iree-turbine's does),
    as a campaign's worker does after a crash."""
    if issue.third_party:
        try:
            resolve(issue.backend)
        except BackendError as e:
            pytest.skip(f"{issue.id} is an issue of backend {issue.backend!r}, not installed here ({e})")
        if not runs:  # rendering runs nothing: no probe (1 to 3 s a backend issue)
            return
        try:
            runs_probe(issue.backend)
        except Exception:  # noqa: BLE001 - the pending failure, taken
            pass


def test_baseline_is_not_empty_and_well_formed():
    assert ISSUES, "no known issues loaded"
    for issue in ISSUES:
        assert issue.patterns and issue.title and (issue.folder / "program.json").is_file()


def test_the_baseline_is_data_and_its_scripts_are_rendered_never_committed():
    """A known issue is issue.json, program.json and, where one is cut by hand, minimal.py (what upstream
    receives); its script follows from them (``report repro``). A repro.py left in a folder would be run in
    place of the rendering (``KnownIssue.render``)."""
    for issue in ISSUES:
        extra = sorted(p.name for p in issue.folder.iterdir())
        assert set(extra) - {"minimal.py"} == {"issue.json", "program.json"}, (
            f"{issue.folder} holds {extra}: a known issue's folder keeps its data alone (delete the rest; "
            f"`dedup-harness report repro {issue.id}` renders its script)")


def test_a_negative_zero_is_a_value_the_program_holds_not_a_spelling_of_one():
    """KI-102's -0.0 global is one; KI-122's -0.0059... weights are not (a text search of the program took them for
    one and let KI-102 claim wrong values it never had)."""
    from reports.triggers import TRIGGERS

    has = TRIGGERS["negative_zero"][0]
    issues = {i.id: i for i in ISSUES}
    assert has(issues["KI-102"].program(), RunConfig())
    assert "-0.0" in issues["KI-122"].program().to_json() and not has(issues["KI-122"].program(), RunConfig())


def test_every_trigger_is_one_the_harness_can_take_away_and_each_issues_own_program_has_its_triggers():
    """An issue's triggers say what its bug needs: its own program has them,
    or its own hits would be named unexplained (reports.triggers.claimed)."""
    from reports.triggers import TRIGGERS, explains

    for issue in ISSUES:
        assert all(t in TRIGGERS for spec in issue.triggers for t in spec.split("|")), (issue.id, issue.triggers)
        assert explains(issue, issue.program(), issue.config(RunConfig)), (issue.id, issue.triggers)


@pytest.mark.unit
def test_model_issues_are_read_where_they_are_kept():
    """The model baseline (check, zoo) is found and names its own findings: a
    wrong path would make every model finding new and skip every model repro."""
    from reports.known_issues import MODEL_ROOT, known_model_issue, model_issues

    issues = model_issues()
    assert len(issues) == len(list(MODEL_ROOT.glob("*/issue.json"))) > 0
    for issue in issues:
        assert (MODEL_ROOT / next(p.parent.name for p in MODEL_ROOT.glob(f"{issue['id']}-*/issue.json")) / "repro.py").is_file()
    ki = next(i for i in issues if not i.get("models") and i.get("backend", "all") == "all")
    assert known_model_issue(ki["patterns"][0].replace("*", "x"), backend="aot_eager") is not None


@pytest.mark.unit
@pytest.mark.parametrize("path", sorted(ROOT.glob("*/issue.json")) + sorted(MODEL_ROOT.glob("*/issue.json")),
                         ids=lambda p: f"{p.parent.parent.name}/{p.parent.name.split('-')[0]}-{p.parent.name.split('-')[1]}")
def test_every_issue_says_where_it_stands_upstream(path):
    """Every record carries upstream (PyTorch issue/PR links, or "unfiled"), the search that found them (query, verdict)
    and status ("open", "by design", or "fixed in" the release its fixed_in
    names): a record without them is not filed the way PyTorch asks."""
    d = json.loads(path.read_text())
    assert "upstream" in d and "status" in d, f"{path}: add upstream and status"
    assert d["upstream"] == "unfiled" or (isinstance(d["upstream"], list) and d["upstream"] and all(
        re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", u) for u in d["upstream"])), d["upstream"]
    search = d.get("upstream_search") or {}
    assert search.get("query") and search.get("verdict"), (
        f"{path}: search PyTorch's tracker for it and record upstream_search: {{query, verdict}}")
    if search["verdict"].startswith(("duplicate of", "fixed by", "a case of")):  # a verdict that names its link
        assert isinstance(d["upstream"], list), f"{path}: the verdict names upstream links; list them in upstream"
    if d.get("fixed_in"):
        assert d["status"] == f"fixed in {d['fixed_in']}", d["status"]
    else:
        assert d["status"] in ("open", "by design"), d["status"]


@pytest.mark.unit
def test_a_report_shows_the_known_issues_it_met_with_their_upstream_status(tmp_path):
    from reports.html import render_html

    issue = next(i for i in ISSUES if i.upstream)
    page = render_html({"backend": "aot_eager", "torch": "2.13.0", "findings": [
        {"signature": issue.patterns[0], "known_issue": issue.id, "count": 2, "folder": "findings/x"}]}, tmp_path)
    assert 'id="known-table"' in page and issue.status in page and issue.upstream[0] in page


@pytest.mark.unit
def test_releases_compare_numerically_without_the_build():
    assert release("2.15.0+cu132") == release("2.15.0") == (2, 15, 0)
    assert release("2.10.0+cpu") > release("2.9.1") and release("2.16.0.dev20260101+cpu") > release("2.15.0")
    issue = next(i for i in ISSUES if i.fixed_in is None)
    fixed = dataclasses.replace(issue, fixed_in="2.15.0")
    assert not issue.fixed_on("2.99.0")
    assert fixed.fixed_on("2.15.0+cu132") and fixed.fixed_on("2.16.0") and not fixed.fixed_on("2.13.0+cpu")
    assert not fixed.fixed_on("2.9.0")  # 2.9 < 2.15: not as strings
    with pytest.raises(ValueError):
        release("nightly")


@pytest.mark.unit
def test_every_issue_records_where_it_was_seen():
    for issue in ISSUES:
        assert issue.torch_seen, f"{issue.id}: no torch_seen"
        assert all(release(v) for v in issue.torch_seen)
        if issue.fixed_in:  # fixed after the last release it was seen on
            assert release(issue.fixed_in) > max(release(v) for v in issue.torch_seen), issue.id


@pytest.mark.unit
def test_a_release_before_every_one_the_bug_was_seen_on_does_not_expect_it():
    issue = dataclasses.replace(ISSUES[0], torch_seen=("2.10.0", "2.13.0"), fixed_in=None)
    assert issue.before_seen("2.8.0+cu128") and not issue.before_seen("2.10.0") and not issue.before_seen("2.15.0")


@pytest.mark.unit
def test_a_nested_compile_region_program_needs_the_decorator():
    needs = {i.id: i.needs() for i in ISSUES}
    assert "nested_compile_region" in needs["KI-003"] and "nested_compile_region" not in needs["KI-001"]


def _claimed(issue) -> tuple[str, ...] | None:
    """The oracles whose findings the issue's patterns name; None where one
    names any oracle (``*``) or a door's."""
    heads = {p.split(":")[0] for p in issue.patterns}
    return tuple(sorted(heads)) if heads <= set(ORACLES) else None


def _change(issue) -> dict | None:
    """The change a guard issue was found through (a generators.variants.Variant as a dict); a rewrite issue's
    variant says only whether a gradient differs."""
    return issue.variant if issue.variant and "kind" in issue.variant else None


def _judged(issue, names: tuple[str, ...] | None, alone: bool = False) -> tuple[list, list[str]]:
    """The issue's program run for the oracles ``names`` (None: all) and the
    signatures of their failures. An issue found through one change makes
    that change alone where ``alone``, else every change the program offers
    (the one it was found through may need another's recompile before it),
    on the backend it was recorded on, in the mode and at the precision it
    was found in; on another (--backend), as that backend can run it."""
    same = ON[issue.id] == issue.backend
    change = _change(issue)
    config = run_config(ON[issue.id], names, variants=-1 if change else None,
                        **({"mode": issue.mode, "precision": issue.precision, "dedup": issue.dedup} if same else {}))
    if alone and change:
        config = dataclasses.replace(config, changes=(change_key(change),))
    outcome = run_program(issue.program(), config)
    failures = [v for v in judge(outcome, names) if v.failed]
    return failures, [triage(outcome, v).signature for v in failures]


@pytest.mark.parametrize("issue", RUN)
def test_known_issue_still_reproduces_with_its_signature(issue):
    _skip_if_unavailable(issue)
    if issue.repro == "replay":  # a CUDA-graph issue: its calls replayed as the campaign made them
        replay = run_replay(issue.program(), ReplayPlan.from_dict(issue.replay["plan"]), ON[issue.id],
                            device=issue.replay.get("device", "cuda"), dedup=issue.dedup)
        failures = [v for v in cudagraph.verdicts(replay) if v.failed]
        signatures = [triage_replay(replay, v).signature for v in failures]
    elif issue.program().options.door:  # found through a door (generators.doors): its own run
        run = run_door(issue.program(), issue.config(RunConfig) if ON[issue.id] == issue.backend else
                       run_config(ON[issue.id], (), dedup=issue.dedup))
        failures = [v for v in judge_door(run) if v.failed]
        signatures = [triage_door(run, v).signature for v in failures]
    else:
        # A live issue is judged by the oracles its patterns name (by the differential oracle first where a
        # pattern names any: a crash shows there), and by every oracle only if they do not find it; a fixed
        # one by every oracle, none of which may find it.
        # A live issue found through one change is tried with that change alone first (every change a program
        # offers is a recompile: KI-130's 19 took 38 s of the gate), then with all of them.
        claimed = _claimed(issue)
        tries = [None] if issue.fixed_on(torch.__version__) else [claimed] if claimed else [("differential",), None]
        ways = (True, False) if _change(issue) and not issue.fixed_on(torch.__version__) else (False,)
        for alone, names in [(alone, names) for alone in ways for names in tries]:
            failures, signatures = _judged(issue, names, alone)
            if any(issue.matches(s) for s in signatures):
                break
    if issue.fixed_on(torch.__version__):
        assert not any(issue.matches(s) for s in signatures), (
            f"{issue.id} is recorded fixed in {issue.fixed_in} but reproduces on torch {torch.__version__}: "
            f"{signatures}")
        return
    if not failures and issue.machine:
        pytest.skip(f"{issue.id} depends on the machine ({issue.machine}) and does not reproduce on this one: "
                    "not judged here")
    if not failures:
        pytest.fail(f"{issue.id} appears fixed in this torch ({torch.__version__}): its program now passes. "
                    f"Record the release as fixed_in in its issue.json ({issue.title})")
    if not any(issue.matches(s) for s in signatures):
        others = {s: known_issues.match(s, ON[issue.id]) for s in signatures}
        if all(o is not None and o.id != issue.id for o in others.values()):  # masked, and counted as such
            pytest.skip(f"{issue.id}: its program first meets {sorted({o.id for o in others.values()})} "
                        f"({signatures}): masked by another recorded bug; its standalone repro checks its own")
    assert any(issue.matches(s) for s in signatures), (
        f"{issue.id} fails, but with another signature: {signatures}")


@pytest.mark.parametrize("issue", REPROS)
def test_standalone_repro_exits_1_while_the_bug_is_there(issue, tmp_path):
    _skip_if_unavailable(issue)
    done = warm.run([str(issue.write_script(tmp_path))], timeout=300)
    if issue.fixed_on(torch.__version__):  # 0: passes; 3: fails, but not with this bug
        assert done.returncode in (0, 3) and "REPRODUCED" not in done.stdout, (
            f"{issue.id} is recorded fixed in {issue.fixed_in} but its repro exits {done.returncode}:\n"
            f"{done.stdout}\n{done.stderr[-2000:]}")
        return
    assert done.returncode == 1, f"repro exit {done.returncode}:\n{done.stdout}\n{done.stderr[-2000:]}"
    assert "REPRODUCED" in done.stdout


@pytest.mark.parametrize("issue", ISSUES, ids=[i.id for i in ISSUES])
def test_each_issue_renders_a_script_that_compiles_and_expects_its_own_failure(issue):
    _skip_if_backend_absent(issue, runs=False)
    text = issue.render()
    compile(text, f"{issue.id}.py", "exec")
    if issue.repro in ("differential", "guard"):
        assert f"EXPECT_CRASH = {issue.expect_crash!r}" in text, issue.id


@pytest.mark.unit
def test_the_known_issues_page_ranks_by_what_campaigns_meet_and_links_upstream(tmp_path):
    from reports import known_issues_page as page

    known = next(i for i in ISSUES if i.upstream)
    runs = [{"programs": 10, "torch": "2.13.0", "findings": [{"known_issue": "KI-003", "count": 4},
                                                             {"known_issue": known.id, "count": 6}],
             "masked": {"judgments": 50, "by_issue": {"KI-003": {"masked": 5}}}},
            {"programs": 10, "torch": "2.13.0", "findings": [{"known_issue": "KI-003", "count": 3}, {"known_issue": None}]}]
    measured = page.measure(runs, "cmd")
    assert measured["met"] == {"KI-003": 7, known.id: 6} and measured["masked"] == {"KI-003": 5}
    table = page.rows(measured)
    assert [r["id"] for r in table[:2]] == ["KI-003", known.id] and len(table) == len(ISSUES)
    assert table[0]["met_share"] == 7 / 20 and table[0]["masked_share"] == 5 / 50
    assert all(r["verdict"] for r in table), "every row says what the upstream search found"
    md, html = page.write(tmp_path, measured)
    text, markup = md.read_text(), html.read_text()
    assert text.count("\n| KI-") == len(ISSUES) and f"{len(page.duplicates(table))} already known upstream" in text
    assert f'href="{known.upstream[0]}"' in markup and markup.count("<tr id=\"KI-") == len(ISSUES)


@pytest.mark.unit
def test_a_long_crash_message_keeps_the_list_it_ends_with_so_its_issue_is_told_apart():
    """KI-132 and KI-133 are one message told apart by the ops it lists last: a crash message is kept whole
    enough (harness.execute.failure) for the signature to keep that list (reports.signature.normalize), even
    when the list is long (a 10-minute campaign of 2026-11-30 cut it at 500 characters: three findings
    matched neither issue and their repros were 'unconfirmed')."""
    from harness.execute import failure
    from reports.signature import normalize

    def signature(ops: list) -> str:
        message = ("torch.autograd.graph.region_activation_memory_budget: must cover the entire forward of a graph "
                   "(including HOP bodies), but 32 forward op(s) are unannotated. Wrap the whole forward in a single "
                   "region; use a graph break to scope different budgets to different graphs. Note that a graph "
                   f"break inside the annotated region can also cause unannotated ops here. Unannotated ops: {ops}")
        kept = failure(RuntimeError(message), "backend_compile").message
        assert kept.endswith(f"{ops}")
        return ("differential:crash:dedup:backend_compile:BackendCompilerFailed: backend='aot_eager' raised: "
                f"RuntimeError: {normalize(kept)}:autograd=partition.budget")

    regions = signature(["invoke_subgraph_8", "getitem", *[f"op_{i}" for i in range(30)]])
    assert [i.id for i in known_issues.matching(regions, "aot_eager")] == ["KI-132"], regions
    assert [i.id for i in known_issues.matching(signature(["copy_"]), "aot_eager")] == ["KI-133"]


@pytest.mark.unit
def test_a_crash_message_two_causes_share_is_claimed_only_where_the_recorded_cause_s_trigger_is():
    """'stable topological sort failed' is KI-006's (regions traced under torch.autocast) and KI-139's (a region
    starting at a getitem of a tuple node): KI-006 claims it only where a call runs under autocast, and the run
    without autocast is a program of its own (reports.triggers: autocast)."""
    from reports.triggers import explains, present, removed

    issues = {i.id: i for i in ISSUES}
    ki006, ki139 = issues["KI-006"], issues["KI-139"]
    config = ki006.config(RunConfig)
    assert present("autocast", ki006.program(), config) and explains(ki006, ki006.program(), config)
    plain, _ = removed("autocast", ki006.program(), config)
    assert plain is not None and not present("autocast", plain, config)
    assert not explains(ki006, ki139.program(), ki139.config(RunConfig))


def test_the_hard_error_of_a_region_body_is_claimed_only_for_its_own_graph_break_and_where_it_may_alias():
    """KI-005 (aliasing) had claimed every UncapturedHigherOrderOpError: a body with a data-dependent shape (KI-149)
    and a fault planted in torch's aliasing check (every body's inputs read as aliased) hid behind it. The signature
    carries the graph break's title now, and KI-005 claims it only where some block may alias."""
    from oracles.verdict import Status, Verdict
    from reports.triage import Finding, known_issue
    from reports.triggers import claimed, present

    issues = {i.id: i for i in ISSUES}
    ki005, ki149 = issues["KI-005"], issues["KI-149"]
    head = "differential:crash:backend:dynamo:UncapturedHigherOrderOpError: This higher order operator doesn't " \
           "work unless it is captured completely with torch.compile. Got graph break/error: "
    aliasing, shape = head + "Encountered aliasing during higher order op tracing", head + "Dynamic shape operator"
    verdict = Verdict("differential", Status.FAIL, "crash", "dynamo", "")
    config = RunConfig(backend="aot_eager")
    assert present("aliasing", ki005.program(), config) and not present("aliasing", ki149.program(), config)
    assert known_issue(claimed(Finding(aliasing, verdict, ki005.program(), config, "backend", ""))).id == "KI-005"
    assert known_issue(claimed(Finding(shape, verdict, ki149.program(), config, "backend", ""))).id == "KI-149"
    lied = claimed(Finding(aliasing, verdict, ki149.program(), config, "backend", ""))  # no block there may alias
    assert lied.signature.startswith("unexplained:KI-005:") and known_issue(lied) is None
