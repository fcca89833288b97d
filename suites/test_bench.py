"""The bench report (reports/bench.py), and the recorder it lets a run skip."""

from __future__ import annotations

import argparse
import json

import pytest

from harness.pipeline import run_program
from oracles.registry import ORACLES, run_config
from reports import bench

pytestmark = pytest.mark.unit


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_quick_bench_reports_every_set(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench.main(_args("--backend", "eager", "-n", "2", "--seed", "1", "--json", str(out))) == 0
    report = json.loads(out.read_text())
    assert report["programs"] == 2 and report["backend"] == "eager" and not report["errors"]
    assert set(report["sets"]) == {bench.BARE, *bench.SETS}
    for name, entry in report["sets"].items():
        assert entry["programs"] == 2
        assert entry["seconds_per_program"] > 0 and entry["programs_per_second_per_worker"] > 0
        assert entry["cpu_seconds_per_program"] > 0
        assert entry["stages_per_program"] and all(v >= 0 for v in entry["stages_per_program"].values())
        if name != bench.BARE:
            assert entry["ratio"] > 0 and entry["median_ratio"] > 0 and entry["cpu_ratio"] > 0
            assert entry["oracles"] == list(bench.SETS[name])
            assert "compiled" in entry["stages_per_program"] and "judge" in entry["stages_per_program"]
    printed = capsys.readouterr().out
    assert all(name in printed for name in bench.SETS) and "ratio" in printed


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
