"""The gate's time budget (suites/budget.py) covers every suite, fits the
gate, and fires: under ``--gate-budget`` a test past its share fails with its
measured time, and a suite past its figure fails the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import warm
from suites.budget import GATE_SECONDS, MARGIN, START_SECONDS, SUITES, TEST_SECONDS, WORKERS

pytestmark = pytest.mark.unit

HERE = Path(__file__).resolve().parent


def test_every_suite_has_a_figure_and_together_they_fit_the_gate():
    suites = {p.name for p in HERE.glob("test_*.py")}
    assert suites == set(SUITES), f"without a figure: {sorted(suites - set(SUITES))}; " \
                                  f"figures of no suite: {sorted(set(SUITES) - suites)}"
    # less their margin, the lanes' seconds less what no test spends of them
    assert sum(SUITES.values()) / MARGIN <= WORKERS * (GATE_SECONDS - START_SECONDS), sum(SUITES.values())


def _pytest(tmp_path: Path, *args: str):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "HYPOTHESIS_PROFILE")}
    return warm.run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "suites.pytest_plugin",
                     "--rootdir", str(tmp_path), *args], cwd=tmp_path, env=env, timeout=120)


def test_a_test_past_its_share_fails_with_its_time_and_a_suite_past_its_figure_fails_the_run(tmp_path):
    name = "test_planted_budget.py"  # in no table: its figure is 0, so any time is past it
    (tmp_path / name).write_text("import time\n\ndef test_quick():\n    pass\n\n"
                                 "def test_slow():\n    time.sleep(0.5)\n")
    # shares times 0.2 / TEST_SECONDS: the slow test is past its share of 0.2 s
    done = _pytest(tmp_path, name, "--gate-budget", str(0.2 / TEST_SECONDS))
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "1 failed, 1 passed" in out, out[-3000:]
    assert f"{name}::test_slow took 0.5 s: past its share of the gate" in out, out[-3000:]
    # within its share (TEST_SECONDS), past its suite's figure: the run fails, naming the suite
    done = _pytest(tmp_path, name, "--gate-budget", "1")
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "2 passed" in out and f"{name}  OVER" in out, out[-3000:]
    # and without the option nothing is judged
    done = _pytest(tmp_path, name)
    assert done.returncode == 0 and "gate budget" not in done.stdout, done.stdout[-3000:]


def test_the_scale_is_a_number_or_this_machines_bare_loop_over_the_measuring_machines(monkeypatch):
    from suites import budget

    assert budget.gate_scale("1.5") == (1.5, "given")
    with pytest.raises(pytest.UsageError, match="neither a number nor 'auto'"):
        budget.gate_scale("fast")
    # the calibration itself is real in the nightly tier (make nightly: GATE_SCALE=auto); here its arithmetic
    monkeypatch.setattr(budget, "calibrate", lambda n=budget.CALIBRATION: 2 * budget.REFERENCE_BARE)
    scale, source = budget.gate_scale("auto")
    assert scale == pytest.approx(2.0) and source.startswith("auto: the bare loop")
