"""The bench report (campaigns/bench.py), and the recorder it lets a run skip."""

from __future__ import annotations

import argparse
import json

import pytest

from harness.pipeline import run_program
from oracles.registry import ORACLES, run_config
from campaigns import bench

pytestmark = pytest.mark.unit


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


# Nightly since issue 42's cut to six minutes (12 s: every set run twice, a warm-up and a measure): the bench measures, it
# judges nothing; its input errors and its planted-fault table's parts stay in the gate
@pytest.mark.nightly
def test_quick_bench_reports_every_set(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench.main(_args("--backend", "eager", "-n", "1", "--seed", "1", "--campaign", "0", "--faults", "none",
                            "--json", str(out))) == 0
    report = json.loads(out.read_text())
    assert report["programs"] == 1 and report["backend"] == "eager" and not report["errors"]
    assert set(report["sets"]) == {bench.BARE, *bench.SETS}
    for name, entry in report["sets"].items():
        assert entry["programs"] == 1
        assert entry["seconds_per_program"] > 0 and entry["programs_per_second_per_worker"] > 0
        assert entry["cpu_seconds_per_program"] > 0
        assert entry["stages_per_program"] and all(v >= 0 for v in entry["stages_per_program"].values())
        if name != bench.BARE:
            assert entry["ratio"] > 0 and entry["median_ratio"] > 0 and entry["cpu_ratio"] > 0
            assert entry["oracles"] == list(bench.SETS[name])
            assert "compiled" in entry["stages_per_program"] and "judge" in entry["stages_per_program"]
    # --campaign 0 and --faults none skip both
    assert report["campaign"] is None and report["faults"] is None
    printed = capsys.readouterr().out
    assert all(name in printed for name in bench.SETS) and "ratio" in printed
    assert "campaign:" not in printed and "planted faults" not in printed


def test_programs_are_drawn_deterministically():
    first = bench.draw_programs(3, seed=5)
    assert [p.to_json() for p in first] == [p.to_json() for p in bench.draw_programs(3, seed=5)]
    assert [p.to_json() for p in bench.draw_programs(2, seed=5)] == [p.to_json() for p in first[:2]]


def test_bad_set_is_an_error(capsys):
    assert bench.main(_args("--sets", "telepathy")) == 2
    assert "unknown oracle set(s) telepathy" in capsys.readouterr().err


def test_sets_name_real_oracles():
    assert bench.SETS["all"] == tuple(ORACLES)
    assert all(n in ORACLES for names in bench.SETS.values() for n in names)


def test_structure_is_recorded_only_for_oracles_that_read_it():
    assert run_config("aot_eager", ("differential",)).record_structure is False
    assert run_config("aot_eager").record_structure is True
    for name, oracle in ORACLES.items():
        assert run_config("aot_eager", (name,)).record_structure is oracle.structure


def test_oracles_without_structure_judge_alike_without_the_recorder():
    """Skipping the recorder changes no verdict of an oracle that declares it
    never reads it."""
    program = bench.draw_programs(1, seed=2)[0]
    light = [n for n, o in ORACLES.items() if not o.structure]
    config = run_config("eager", tuple(light))
    assert not config.record_structure
    without = run_program(program, config)
    with_ = run_program(program, run_config("eager", tuple(light), record_structure=True))
    assert not without.capture.structure and with_.capture.structure
    for name in light:
        a, b = ORACLES[name](without), ORACLES[name](with_)
        assert (a.status, a.kind, a.where) == (b.status, b.kind, b.where), name


# the bench's own campaign and planted-fault timing (19 s): a developer's figure, not a user's path; the
# gate keeps the quick bench's sets, and campaigns and planted faults are judged by their own suites
@pytest.mark.nightly
def test_campaign_and_a_planted_fault_are_timed(tmp_path, capsys):
    """One real two-program campaign and one planted fault's campaign (a
    wrong-value backend every drawn program shows), both on one worker."""
    out = tmp_path / "bench.json"
    argv = ("--backend", "eager", "-n", "1", "--sets", "differential", "--campaign", "2", "--workers", "1",
            "--faults", "perturb_one_element", "--fault-budget", "60", "--out", str(tmp_path / "runs"),
            "--json", str(out))
    assert bench.main(_args(*argv)) == 0
    report = json.loads(out.read_text())
    campaign = report["campaign"]
    assert "error" not in campaign, campaign
    assert campaign["workers"] == 1 and campaign["programs"] >= 1 and campaign["wall_seconds"] > 0
    assert campaign["programs_per_second_per_worker"] > 0 and campaign["ratio_to_bare"] > 0
    assert campaign["bare_seconds_per_program"] == report["sets"][bench.BARE]["seconds_per_program"]
    assert campaign["seconds_per_program"] and set(campaign["root_causes"]) == {"known", "new", "unconfirmed"}
    assert (tmp_path / "runs" / "campaign" / "summary.json").exists()
    same = campaign["same_programs"]  # the bare loop on the campaign's own programs, as kept in programs.jsonl
    assert same["programs"] == campaign["programs"] and same["bare_seconds_per_program"] > 0
    assert 0 < same["task_ratio"] <= same["wall_ratio"], same

    fault = report["faults"]["results"]["perturb_one_element"]
    assert fault["found"], fault
    assert fault["backend"] == bench.FAULTS["perturb_one_element"]
    assert 0 < fault["seconds"] < 60 and fault["programs"] >= 1 and fault["bare_programs"] > 0
    first = bench.first_new_finding(tmp_path / "runs" / "faults" / "perturb_one_element")
    assert first is not None and first["signature"] == fault["signature"]
    findings = json.loads((tmp_path / "runs" / "faults" / "perturb_one_element" / "summary.json").read_text())["findings"]
    assert not next(f for f in findings if f["signature"] == fault["signature"])["known_issue"]

    printed = capsys.readouterr().out
    assert "campaign: 2 programs" in printed and "programs/s/worker" in printed and f"on its own {campaign['programs']} programs" in printed
    assert "planted faults" in printed and f"perturb_one_element  {fault['seconds']:.1f}" in printed


@pytest.mark.parametrize("argv, message", [
    (("--faults", "perturb_one_element,telepathy"), "unknown fault(s) telepathy"),
    (("--campaign", "-1"), "--campaign and --workers must be counts"),
    (("--workers", "-2"), "--campaign and --workers must be counts"),
    (("-n", "-1"), "-n must be a count"),
    (("--fault-budget", "-5"), "--fault-budget must be positive"),
])
def test_bad_campaign_input_is_an_error(argv, message, capsys):
    assert bench.main(_args(*argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_the_fault_catalogue_names_backends_by_string():
    """reports/ never imports suites/: every fault is a backend string a
    worker resolves, one per planted fault usable on CPU."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(bench.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.startswith("suites") for m in imported)
    assert all(isinstance(b, str) and b.startswith("suites.planted") for b in bench.FAULTS.values())
    assert not {"abort_or_hang", "abort_on_subgraph_calls", "float_sign_guarded"} & set(bench.FAULTS)
    for name, backend in bench.FAULTS.items():
        module, _, attr = backend.partition(":")
        assert attr.partition("__")[0] == name.removeprefix("op_" if name in bench.OP_FAULTS else ""), (name, backend)
