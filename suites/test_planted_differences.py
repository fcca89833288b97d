"""Every entry of the call-difference catalogue has a planted fault of its
own (suites/planted_differences.py) that a short search over drawn programs
finds (suites/difference_faults.py): the honest pipeline passes the found
program, the fault fails it, the same program with the entry's difference
taken away passes under the fault, and the finding's repro exits 1 on the
fault and 0 without.

The programs the search found are kept in data/planted_differences.json
(regenerate: ``python -m suites.difference_faults``); the gate judges one
entry per family, the nightly tier every entry, its repros, and the search
itself from scratch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generators.differences import BY_NAME, DIFFERENCES, FAMILIES
from generators.ir import from_dict

from .difference_faults import DATA, attributable, failures, search
from .planted_differences import FAULTS
from harness import warm

pytestmark = pytest.mark.unit

FOUND = json.loads(DATA.read_text()) if DATA.exists() else {}
# one entry per family for the gate, each quick to judge (the others run nightly): tensor:alias and
# derived:python_type since issue 42's cut to six minutes (tensor:dtype and derived:dtype took 13 and 8 s; the
# binding family's entries all take 11 s or more)
GATE = ("bind:star_args", "reach:partial", "object:method_on_instance", "type:tensor_subclass",
        "tensor:alias", "derived:python_type", "state:dataclass")
assert {BY_NAME[e].family for e in GATE} == set(FAMILIES)


def test_every_catalogue_entry_has_a_planted_fault_and_a_program_that_catches_it():
    assert set(FAULTS) == {d.name for d in DIFFERENCES}
    missing = [e for e in FAULTS if "program" not in FOUND.get(e, {})]
    assert not missing, f"no program found for {missing}: rerun python -m suites.difference_faults"


def _judged(entry: str) -> None:
    found = FOUND[entry]
    program, dedup = from_dict(found["program"]), found["dedup"]
    assert failures(program, dedup, entry=entry) == [], "the honest pipeline must pass the found program"
    caught = failures(program, dedup, entry)
    assert caught and {v.oracle for v in caught} & set(found["oracles"]), caught
    # caught through the entry's own difference: a change between calls that realises it, or a
    # difference between repeats whose removal leaves the fault nothing to act on
    assert attributable(entry, program, dedup, caught), f"{entry}'s fault fires without its difference"


@pytest.mark.long(seconds=14)
@pytest.mark.parametrize("entry", GATE)
def test_a_planted_fault_is_caught_where_its_difference_shows(entry):
    _judged(entry)


@pytest.mark.nightly
@pytest.mark.parametrize("entry", sorted(set(FAULTS) - set(GATE)))
def test_every_planted_fault_is_caught_where_its_difference_shows(entry):
    _judged(entry)


def _repro_exit(entry: str, planted: bool, tmp_path) -> int:
    from reports.repro import driver_for
    from oracles.registry import ORACLES

    from .planted_pass import render_planted

    found = FOUND[entry]
    program, dedup, verdict = from_dict(found["program"]), found["dedup"], found["verdict"]
    check, variant = driver_for(verdict["details"], ORACLES[verdict["oracle"]].severity, verdict["oracle"],
                                verdict["kind"])
    backend = f"suites.planted_differences:{FAULTS[entry].__name__}__aot_eager" if planted else "aot_eager"
    path = tmp_path / "repro.py"
    path.write_text(render_planted(program, backend, check, variant, dedup=dedup))
    root = Path(__file__).resolve().parents[1]  # the repro imports the planted fault from here
    return warm.run([str(path)], cwd=root, timeout=300).returncode


@pytest.mark.nightly
@pytest.mark.parametrize("entry", sorted(FAULTS))
def test_a_planted_fault_finding_has_a_repro_that_exits_1_on_the_fault_and_0_without(entry, tmp_path):
    assert _repro_exit(entry, True, tmp_path) == 1
    assert _repro_exit(entry, False, tmp_path) == 0


@pytest.mark.nightly
@pytest.mark.parametrize("entry", GATE)
def test_the_search_finds_a_program_for_a_fault_from_scratch(entry):
    assert "program" in search(entry, n=300, budget=240.0), f"no drawn program caught {entry}'s fault"
