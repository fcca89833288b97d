"""Every family of torch settings a program can be compiled under
(generators.settings) has a planted fault on the path it opens
(suites/planted_settings.py) that a short search over drawn programs finds
(suites/setting_faults.py): the honest pipeline passes the found program,
the fault fails it, the same program without its settings passes under the
fault, and the finding's repro (which sets the setting itself) exits 1 on
the fault and 0 without.

The programs the search found are kept in data/planted_settings.json
(regenerate: ``python -m suites.setting_faults``); the gate judges every
family and one repro, the nightly tier every repro and the search itself
from scratch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generators.ir import from_dict
from generators.settings import FAMILIES, SETTINGS
from harness import torch_config, warm

from .planted_settings import FAULTS
from .setting_faults import BACKENDS, DATA, failures, search, without_settings

pytestmark = pytest.mark.unit

FOUND = json.loads(DATA.read_text()) if DATA.exists() else {}


def test_every_setting_family_has_a_planted_fault_and_a_program_that_catches_it():
    assert set(FAULTS) == set(FAMILIES) and all(SETTINGS[s].family == f for f, (_, s) in FAULTS.items())
    missing = [f for f in FAULTS if "program" not in FOUND.get(f, {})]
    assert not missing, f"no program found for {missing}: rerun python -m suites.setting_faults"
    for family, (_, setting) in FAULTS.items():
        assert setting in from_dict(FOUND[family]["program"]).options.settings
        assert torch_config.available(setting), f"this torch lacks {setting}'s keys"


@pytest.mark.parametrize("family", sorted(FAULTS))
def test_a_planted_setting_fault_is_caught_only_under_its_setting(family):
    program = from_dict(FOUND[family]["program"])
    assert failures(program, family, False) == [], "the honest pipeline must pass the found program"
    caught = failures(program, family, True)
    assert caught and {v.oracle for v in caught} & set(FOUND[family]["oracles"]), caught
    assert failures(without_settings(program), family, True) == [], f"{family}'s fault fires without its setting"


def _repro_exit(family: str, planted: bool, tmp_path) -> int:
    from oracles.registry import ORACLES
    from reports.repro import driver_for

    from .planted_pass import render_planted

    found = FOUND[family]
    program, verdict = from_dict(found["program"]), found["verdict"]
    check, variant = driver_for(verdict["details"], ORACLES[verdict["oracle"]].severity, verdict["oracle"],
                                verdict["kind"])
    fault, _ = FAULTS[family]
    backend = f"suites.planted_settings:{fault.__name__}__{BACKENDS[family]}" if planted else BACKENDS[family]
    path = tmp_path / "repro.py"
    path.write_text(render_planted(program, backend, check, variant, dedup=True))
    root = Path(__file__).resolve().parents[1]  # the repro imports the planted fault from here
    return warm.run([str(path)], cwd=root, timeout=300).returncode


@pytest.mark.parametrize("family", [f if f == "inline" else pytest.param(f, marks=pytest.mark.nightly)
                                    for f in sorted(FAULTS)])
def test_a_planted_setting_fault_finding_has_a_repro_that_exits_1_on_the_fault_and_0_without(family, tmp_path):
    assert _repro_exit(family, True, tmp_path) == 1
    assert _repro_exit(family, False, tmp_path) == 0


@pytest.mark.nightly
@pytest.mark.parametrize("family", sorted(FAULTS))
def test_the_search_finds_a_program_for_a_setting_fault_from_scratch(family):
    assert "program" in search(family, n=600, budget=300.0), f"no drawn program caught {family}'s fault"
