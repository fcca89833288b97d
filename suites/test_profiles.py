"""The tiers and Hypothesis profiles of suites/conftest.py, run on a tiny suite of
their own: ``--hypothesis-seed`` replaces the ``ci`` profile's fixed stream,
and the ``nightly`` tests run only in the nightly tier."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness import warm

pytestmark = pytest.mark.unit

HERE = Path(__file__).resolve().parent

SUITE = '''
import json, os
import pytest
from hypothesis import given, settings, strategies as st

def _record(name, value):
    with open(os.environ["DRAWN"], "a") as f:
        f.write(json.dumps([name, value]) + "\\n")

@given(st.integers(0, 10**9))
def test_draws(n):
    _record("draws", n)

def test_scale():
    _record("max_examples", settings.default.max_examples)

@pytest.mark.nightly
def test_long_search():
    _record("nightly", 1)
'''


def _run(tmp_path: Path, *args: str, profile: str = "ci") -> dict:
    drawn = tmp_path / f"drawn-{len(list(tmp_path.glob('drawn-*')))}.jsonl"
    # the inner run takes only its own arguments: an outer PYTEST_ADDOPTS
    # (make nightly PYTEST_ADDOPTS=--hypothesis-seed=1) would seed every run
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, "DRAWN": str(drawn),
           "HYPOTHESIS_PROFILE": profile}
    done = warm.run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                     "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path), *args],
                    env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out: dict = {"output": done.stdout}
    for line in drawn.read_text().splitlines():
        name, value = json.loads(line)
        out.setdefault(name, []).append(value)
    return out


@pytest.fixture
def suite(tmp_path):
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    nightly: x\n    long(seconds): x\n")
    (tmp_path / "test_tiny.py").write_text(SUITE)
    return tmp_path


@pytest.mark.nightly  # 18 s of pytest in pytest; the profiles' registration is checked in the gate
def test_a_seed_replaces_the_ci_profiles_fixed_stream(suite):
    fixed = _run(suite)["draws"]
    one, two, one_again = (_run(suite, f"--hypothesis-seed={s}")["draws"] for s in (1, 2, 1))
    assert one == one_again, "the same seed must draw the same programs"
    assert one != two, "--hypothesis-seed was ignored: two seeds drew the same stream"
    assert one != fixed, "--hypothesis-seed was ignored: the ci profile's fixed stream won"


def test_the_nightly_tier_runs_the_long_searches_and_draws_more(suite):
    ci = _run(suite)
    assert "nightly" not in ci and "1 deselected" in ci["output"]
    nightly = _run(suite, profile="nightly")
    assert nightly["nightly"] == [1]
    assert nightly["max_examples"][0] > ci["max_examples"][0]
    assert len(nightly["draws"]) > len(ci["draws"])
