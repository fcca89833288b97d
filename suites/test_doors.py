"""Every door into the capture pipeline (generators/doors.py): a program
value that carries it, renders it and loses it to the reducer; a run of its
own judged against eager through the same door, with no false alarm on a
correct pipeline (no deduplication, the eager backend); and a planted fault
of its own (suites/planted_doors.py) that its door catches and the plain
compile of the same program does not, with a repro that exits 1 on the
fault and 0 without.

The programs the search found are kept in data/planted_doors.json
(regenerate: ``python -m suites.door_faults``); the gate judges one door
per family and one repro, the nightly tier every door, every repro, the
search from scratch and a campaign that finds, minimizes and reproduces a
door's fault.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from generators.codegen import render
from generators.doors import DOORS, DOORS_LIST, FAMILIES, assign, fits, with_door
from generators.ir import MalformedProgram, Program, from_dict
from generators.reduce import candidates
from generators.regions import with_regions
from generators.strategies import programs
from harness.doors import door_backend, run_door
from harness.outcome import RunConfig
from oracles.door import check, check_cache
from reports.door_triage import triage_door, without_door
from reports.triage import known_issue

from .door_faults import DATA, catches, door_verdict, plain_fails, search
from .planted_doors import FAULTS
from .tiers import examples
from harness import warm

pytestmark = pytest.mark.unit

FOUND = json.loads(DATA.read_text()) if DATA.exists() else {}
GATE = ("transform:vjp", "checkpoint:selective", "control_flow:cond", "export:non_strict", "dynamic:maybe_mark")
assert {DOORS[d].family for d in GATE} | {"cache"} == set(FAMILIES)  # the cache door runs inductor: nightly


def test_every_door_has_a_planted_fault_and_a_program_that_catches_it():
    assert set(FAULTS) == set(DOORS)
    missing = [d for d in DOORS if "program" not in FOUND.get(d, {})]
    assert not missing, f"no program found for {missing}: rerun python -m suites.door_faults"


def _caught(door: str) -> None:
    program = from_dict(FOUND[door]["program"])
    assert program.options.door == door
    assert door_verdict(program).status.value == "pass", "the honest door run must pass the found program"
    assert door_verdict(program, door).failed, f"{door}'s fault is not caught"
    assert not plain_fails(program, door), f"{door}'s fault is caught without the door"


@pytest.mark.parametrize("door", GATE)
def test_a_doors_planted_fault_is_caught_by_the_door_alone(door):
    _caught(door)


@pytest.mark.nightly
@pytest.mark.parametrize("door", sorted(set(DOORS) - set(GATE)))
def test_every_doors_planted_fault_is_caught_by_the_door_alone(door):
    _caught(door)


def _repro_exit(door: str, planted: bool, tmp_path, root) -> int:
    from campaigns.worker import verify_repro
    from reports.repro import render_repro

    program = from_dict(FOUND[door]["program"])
    honest = door_backend(DOORS[door], RunConfig(backend="aot_eager"))
    backend = f"suites.planted_doors:{FAULTS[door].__name__}__{honest}" if planted else honest
    text = render_repro(program, RunConfig(backend="aot_eager", dedup=False), f"planted {door}", "door",
                        {"operator": False}, expect_crash="")
    assert f"BACKEND = {honest!r}" in text
    text = text.replace(f"BACKEND = {honest!r}", f"BACKEND = {backend!r}")
    return verify_repro(text, 300, cwd=str(root))


@pytest.mark.parametrize("door", ["control_flow:cond"])
def test_a_doors_repro_exits_1_on_the_fault_and_0_without(door, tmp_path, request):
    assert _repro_exit(door, True, tmp_path, request.config.rootpath) == 1
    assert _repro_exit(door, False, tmp_path, request.config.rootpath) == 0


@pytest.mark.nightly
@pytest.mark.parametrize("door", sorted(set(DOORS) - {"control_flow:cond"}))
def test_every_doors_repro_exits_1_on_the_fault_and_0_without(door, tmp_path, request):
    assert _repro_exit(door, True, tmp_path, request.config.rootpath) == 1
    assert _repro_exit(door, False, tmp_path, request.config.rootpath) == 0


@pytest.mark.nightly
@pytest.mark.parametrize("door", ["export:unflatten", "checkpoint:reentrant", "dynamic:unbacked"])
def test_the_search_finds_a_program_for_a_doors_fault_from_scratch(door):
    found = search(door, max_examples=20, seeds=range(10, 14), budget=240)
    assert found is not None and catches(found, door)


# -- no false alarms ------------------------------------------------------------------


# 1 program per door in the gate (3 until issue 45's trim, 2 until issue 42's cut to six minutes: 20 s for
# the 24 doors), 3 nightly
@pytest.mark.parametrize("door", sorted(set(DOORS) - {"cache:warm"}))
@settings(max_examples=examples(1, 3), deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(program=programs())
def test_no_door_cries_wolf_on_a_correct_pipeline(door, program):
    """Without the pass and on the eager backend, every door run passes, is
    refused (eager cannot take the program through the door), or cannot
    decide (eager disagrees with itself); it never fails but where torch
    has a recorded bug (KI-059: two while_loops over a grad-requiring
    operand). (Without nested_compile_region: its backward outside
    AOTAutograd, which the eager backend leaves it to, is KI-002.)"""
    assume(fits(door, program))
    program = with_door(with_regions(program, set()), door)
    run = run_door(program, RunConfig(backend="eager", dedup=False))
    verdict = check(run)
    assert not verdict.failed or known_issue(triage_door(run, verdict)) is not None, \
        (door, str(verdict), render(program))


@pytest.mark.nightly
@settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(program=programs())
def test_a_warm_cache_cries_no_wolf(program):
    """The cache door compiles with inductor twice: the warm compile computes
    what the cold one did and hits what the cold one stored."""
    program = with_door(with_regions(program, set()), "cache:warm")
    run = run_door(program, RunConfig(backend="inductor", dedup=False))
    for verdict in (check(run), check_cache(run)):
        assert not verdict.failed or known_issue(triage_door(run, verdict)) is not None, \
            (str(verdict), render(program))


# -- the door as part of the program value ------------------------------------------------


@settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(program=programs(), door=st.sampled_from([d.name for d in DOORS_LIST]))
def test_a_door_is_part_of_the_program_value(program, door):
    assume(fits(door, program))  # a campaign gives a door only to a program it fits
    doored = with_door(program, door)
    assert Program.from_json(doored.to_json()) == doored
    assert doored.to_json() != program.to_json()
    source = render(doored)
    if DOORS[door].where == "source":
        assert source != render(program)
    if DOORS[door].reference:
        assert render(doored, reference=True) != source
    assert any(c.options.door == "" and replace(c, options=replace(c.options, door=door)) == doored
               for c in candidates(doored)), "the reducer must be able to take the door away"
    assert without_door(doored).options.door == ""


def test_an_unknown_door_is_a_clear_error():
    program = Program.from_json((DATA.parent.parent.parent / "reports" / "known_issues" /
                                 "KI-001-dedup-merges-float-constants" / "program.json").read_text())
    with pytest.raises(MalformedProgram, match="unknown door 'no:such'"):
        render(with_door(program, "no:such"))


def test_doors_are_assigned_by_id_at_the_share_asked():
    names = tuple(DOORS)
    given_doors = [assign(f"0-{b}-{k}", 0.25, names) for b in range(40) for k in range(25)]
    share = sum(bool(d) for d in given_doors) / len(given_doors)
    assert 0.2 < share < 0.3
    assert set(given_doors) - {""} == set(names)  # every door is drawn
    assert given_doors == [assign(f"0-{b}-{k}", 0.25, names) for b in range(40) for k in range(25)]  # stable
    assert not any(assign(f"0-{k}", 0.0, names) for k in range(100))


# -- in a campaign ------------------------------------------------------------------------------------


@pytest.mark.nightly  # a campaign of its own (about 90 s)
def test_a_campaign_finds_minimizes_and_reproduces_a_doors_fault(tmp_path, request):
    out = tmp_path / "doors"
    done = warm.run(["-m", "harness", "fuzz", "--backend",
                     "suites.planted_doors:cond_off_when_traced__aot_eager", "--oracles", "door", "--sweep", "off",
                     "--doors", "control_flow:cond", "--door-share", "1", "--budget", "90", "--workers", "2",
                     "--minimize-seconds", "25", "--out", str(out)], timeout=400, cwd=request.config.rootpath)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    found = [f for f in summary["findings"] if f["signature"].startswith("door:mismatch:")
             and ":control_flow:cond:" in f["signature"]]
    assert found and found[0]["repro_exit"] == 1 and found[0]["driver"] == "door", summary["findings"]
    assert summary["door_coverage"]["control_flow:cond"]["programs"] >= 1
    assert "## Door coverage" in (out / "report.md").read_text()
    assert 'id="doors-table"' in (out / "report.html").read_text()
    program = Program.from_json((out / found[0]["folder"] / "program.json").read_text())
    assert program.options.door == "control_flow:cond"  # the finding's program carries its door


def test_the_plain_program_of_a_strict_mark_door_is_valid_where_the_mark_cannot_hold():
    """The dynamic:mark door's plain program (door_triage.without_door) marks strictly only where nothing may pin
    the dim: seed 93's door triage raised MalformedProgram (a harness error) on a program with a second input."""
    from generators.check import check
    from generators.ir import Block, Call, Options, Program, Ref, Section, Stmt, TensorSpec
    from reports.door_triage import without_door

    spec = TensorSpec((2, 3), "float32", False)
    body = (Stmt("v", "add", (Ref("x"), Ref("y0"))),)
    two = Program((("x", spec), ("y0", spec)), Block("function", ("x", "y0"), (), (), (), body, "v"),
                  (Section("calls", "chain", (Call(),)),), options=Options(door="dynamic:mark"))
    assert without_door(two).options.mark_dynamic == (("x", 0, False),)
    check(without_door(two))
    one = Program((("x", spec),), Block("function", ("x",), (), (), (), (Stmt("v", "sin", (Ref("x"),)),), "v"),
                  (Section("calls", "chain", (Call(),)),), options=Options(door="dynamic:mark"))
    assert without_door(one).options.mark_dynamic == (("x", 0, True),)
