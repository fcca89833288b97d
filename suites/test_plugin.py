"""The suites as a pytest plugin (``suites/pytest_plugin.py``), run the way a
backend's repository runs them: pytest in a scratch folder outside any
checkout, the suites found as an installed package. The plugin loads in every
pytest run of the environment, so it must import no torch and must leave a
project's own ``--backend`` option alone."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import suites
from harness import warm

pytestmark = pytest.mark.unit

PLUGIN = "suites.pytest_plugin"
SUITES_ROOT = Path(suites.__file__).resolve().parents[1]  # where this run found the suites


def _pytest(cwd: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """pytest in ``cwd`` with nothing of this run's set-up: no addopts, no
    profile, the suites as installed; where the environment's install does not
    hold these suites (a checkout run with PYTHONPATH), the ones this run
    imported. The plugin as its entry point, or with ``-p`` where the install
    predates the entry point."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH", "HYPOTHESIS_PROFILE")}
    found = subprocess.run([sys.executable, "-c", "import suites; print(suites.__file__)"], cwd=cwd, env=env,
                           capture_output=True, text=True)
    if found.returncode or Path(found.stdout.strip()).resolve() != Path(suites.__file__).resolve():
        env["PYTHONPATH"] = str(SUITES_ROOT)
    plugin = [] if PLUGIN in {ep.value for ep in entry_points(group="pytest11")} else ["-p", PLUGIN]
    return warm.run(["-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, *args],
                    cwd=cwd, env={**env, "HYPOTHESIS_PROFILE": "smoke"}, timeout=timeout)


HEAVY = ("torch", "hypothesis", "generators", "harness", "oracles", "reports", "campaigns")


def test_the_plugin_imports_no_torch_and_none_of_the_harness():
    code = f"import sys, {PLUGIN}; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SUITES_ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_entry_point_is_named_as_its_module():
    """The name makes ``-p suites.pytest_plugin`` (pyproject's addopts) and the
    entry point one plugin, never two registrations of the same module."""
    pyproject = SUITES_ROOT / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("an installed harness: no pyproject.toml beside the suites")
    assert tomllib.loads(pyproject.read_text())["project"]["entry-points"]["pytest11"] == {PLUGIN: PLUGIN}


@pytest.mark.long(seconds=15)  # pytest in pytest: torch imported anew, a few programs
@pytest.mark.parametrize("backend, fails", [
    # a training backend with a wrong value (16 s): nightly since issue 42's cut to six minutes; the gate's
    # campaign and planted-difference tests find perturb_one_element's wrong value, and the pyargs path is the
    # inference-only one's below
    pytest.param("suites.planted:perturb_one_element", True, marks=pytest.mark.nightly),
    ("suites.planted_backends:inference_only_wrong", True),  # an inference-only one: judged forward-only, still caught
    # inference-only and right, no gradient noise (8 s): nightly; the gate judges inference-only runs forward-only
    # in test_backend_capabilities and passes the right training backends through the property suites
    pytest.param("suites.planted_backends:inference_only", False, marks=pytest.mark.nightly),
    pytest.param("aot_eager", False, marks=pytest.mark.nightly),  # the property suites pass it in the gate already
])
def test_pyargs_runs_the_property_suite_on_the_backend_given_from_outside_a_checkout(tmp_path, backend, fails):
    """A planted wrong value is a new finding of the differential oracle, on a
    training backend and on an inference-only one; the right ones pass."""
    done = _pytest(tmp_path, "--pyargs", "suites.test_property", "--backend", backend, "-m", "property",
                   "-k", "test_dedup_eager_backend", "-x")
    out = done.stdout + done.stderr
    if fails:
        assert done.returncode == 1 and "AssertionError: new finding differential:" in out, out[-3000:]
    else:
        assert done.returncode == 0 and "1 passed" in out, out[-3000:]


def test_a_bad_backend_is_one_usage_error_before_anything_runs(tmp_path):
    done = _pytest(tmp_path, "--pyargs", "suites.test_property", "--backend", "no.such.module:fn")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "ERROR: --backend: backend 'no.such.module:fn': cannot import 'no.such.module'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_project_with_its_own_backend_option_keeps_it(tmp_path):
    """A backend's repository whose conftest adds ``--backend`` runs its own
    tests as before: the plugin does not claim the name."""
    (tmp_path / "conftest.py").write_text('def pytest_addoption(parser):\n    parser.addoption("--backend")\n')
    (tmp_path / "test_theirs.py").write_text(
        'def test_theirs(request):\n    assert request.config.getoption("--backend") == "theirs"\n')
    done = _pytest(tmp_path, "--backend", "theirs", "test_theirs.py")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
