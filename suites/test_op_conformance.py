"""Op conformance, parametrized by torch's operator database: every OpInfo op
in every spelling and dtype it has, forward and (where it has one) gradient,
in a deduplicated region and (nightly, or ``--opinfo`` given) in a
``nested_compile_region`` body, on the backend under test
(``pytest --pyargs suites --backend B``; aot_eager otherwise).

One test per op and place, so a backend's CI sees which op regressed; its
message names the cells (spelling, dtype) that failed and how. A backend's
known failures are data (``reports/known_issues/op_expected.json``: backend
-> cell -> why, a known issue's id where one explains it): a listed cell that
fails passes the test, a listed cell that passes fails it (record the fix).
``--opinfo all`` takes every op of the database (a long run: the nightly tier
or a backend's own CI), ``--opinfo OP,...`` the ones named; the gate takes
``GATE_OPS``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import pytest

from suites.pytest_plugin import backend_under_test

# An nn function in every spelling and dtype it has: the gate's sample of the database (the gate is at its
# six minutes; test_op_sweep.py judges add, sin, max and cumprod in every spelling, --opinfo all every op)
GATE_OPS = ("nn.functional.relu",)
HAS_DB = importlib.util.find_spec("torch.testing._internal.common_methods_invocations") is not None


def _ops(config) -> list[str]:
    chosen = config.getoption("opinfo", default="") if config else ""
    if chosen == "all":
        from harness.opinfo_db import database, op_name

        return sorted({op_name(op) for op in database() or ()})
    return [o for o in chosen.split(",") if o] or list(GATE_OPS)


def pytest_generate_tests(metafunc):
    if "op" in metafunc.fixturenames:
        ops = _ops(metafunc.config) if HAS_DB else []
        asked = bool(metafunc.config.getoption("opinfo", default=""))
        params = [pytest.param(op, region, id=f"{op}-{'region' if region else 'dedup'}",
                               marks=() if not region or asked else pytest.mark.nightly)
                  for op in ops for region in (False, True)]
        metafunc.parametrize("op, region", params)


def expected_failures(backend: str) -> dict[str, str]:
    from reports.known_issues import op_expected

    return op_expected(backend)


@pytest.mark.skipif(not HAS_DB, reason="this torch ships no OpInfo database (torch.testing._internal)")
def test_op_conforms(op, region):
    from campaigns.op_sweep import judge_locally
    from campaigns.worker import config_to
    from harness.opinfo_db import select
    from oracles.registry import run_config

    backend = backend_under_test() or "aot_eager"
    config = config_to(replace(run_config(backend, ("differential",))))
    cells = judge_locally(select((op,)), config, region=region)
    known = expected_failures(backend)
    wrong = {c: e for c, e in cells.items() if e["status"] in ("failed", "invalid") and c not in known}
    fixed = {c: known[c] for c, e in cells.items() if c in known and e["status"] == "passed"}
    lines = [f"{c}: {e['status']}: {e.get('reason', '')[:300]}" for c, e in sorted(wrong.items())]
    lines += [f"{c}: recorded as failing on {backend} ({why}) but passes: remove it from op_expected.json"
              for c, why in sorted(fixed.items())]
    assert not lines, f"{op} on {backend} ({'nested_compile_region' if region else 'deduplicated region'}):\n" \
        + "\n".join(lines)
