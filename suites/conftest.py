"""The suites' pytest setup: tiers, Hypothesis profiles, torch state, scheduling.

It sits in the suites package, so ``pytest --pyargs suites`` loads it from an
installed harness as ``pytest suites/`` does from a checkout; what must load
before any suite is collected (``--backend``, markers, the summary) is the
plugin, ``suites/pytest_plugin.py``.

HYPOTHESIS_PROFILE picks both the Hypothesis profile and the tier:
``ci`` (the default, what ``make test`` runs: derandomized, no shrinking,
fixed example counts, no deadline, no example database; tests marked
``nightly`` are deselected), ``nightly`` (``make nightly``: the same suites
with larger example counts and a fresh random stream each run, plus the
``nightly`` tests: long searches rather than checks) and ``fuzz`` (long random
runs that keep their database; the nightly tests too); ``smoke`` is ``ci`` at
five examples, a check that the suites run at all (``test_plugin.py``).
``--hypothesis-seed N`` works under every profile: it replaces the ``ci``
profile's fixed stream.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

from suites.budget import TEST_SECONDS
from suites.tiers import NIGHTLY_PROFILES, PROFILE

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
# CI fails at once on a new finding, printing its program and repro: no shrink
# phase (Hypothesis spent 5+ minutes shrinking one failure, past the suite's
# time budget); minimizing is the campaign's job (campaigns/minimize.py).
# The example count is the suites' common scale: a property suite takes its
# share of it (test_property.py), so one number sizes the CI gate.
settings.register_profile(
    "ci", derandomize=True, max_examples=50, deadline=None, database=None,
    suppress_health_check=_SLOW_OK, print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.register_profile("nightly", max_examples=400, deadline=None, database=None, suppress_health_check=_SLOW_OK,
                          print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.register_profile("fuzz", max_examples=3000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)
settings.register_profile("smoke", parent=settings.get_profile("ci"), max_examples=5)
settings.load_profile(PROFILE)

# One intra-op thread per pytest worker: the workers are the parallelism.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _fresh_torch_state():
    """Each test starts from a clean Dynamo cache and default global state."""
    torch._dynamo.reset()
    grad = torch.is_grad_enabled()
    dtype = torch.get_default_dtype()
    torch.manual_seed(0)
    yield
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)
    torch._dynamo.reset()


# --- scheduling: the long tests first, one lane per xdist worker ---------------
# Under ``--dist worksteal`` worker i starts with the next len(pending) // (n - i)
# tests in order and later steals from the end of the longest queue; a test
# marked ``long(seconds=...)`` (its share of the gate: suites/budget.py) is put
# at the head of the lightest lane, so the long tests run side by side from the
# start instead of one of them starting last and running alone. Tests marked
# ``shares(name)`` read one cache (a module's runs of the same programs): they
# go to one lane together, so the second reads what the first computed.
def pytest_collection_modifyitems(config, items):
    if PROFILE not in NIGHTLY_PROFILES:  # the CI gate: long searches wait for the nightly tier
        nightly = [i for i in items if i.get_closest_marker("nightly")]
        if nightly:
            config.hook.pytest_deselected(items=nightly)
            items[:] = [i for i in items if not i.get_closest_marker("nightly")]
    _schedule(config, items)


def _schedule(config, items):
    if hasattr(config, "workerinput"):  # xdist collects on each worker: the same order everywhere
        workers = int(config.workerinput.get("workercount", 0))
    else:
        workers = getattr(config.option, "numprocesses", None) or 0
    if not isinstance(workers, int) or workers < 2 or len(items) < 2 * workers:
        return

    def seconds(item) -> float:
        mark = item.get_closest_marker("long")
        return float(mark.kwargs.get("seconds", 60)) if mark else 0.0

    def shared(item) -> str:
        mark = item.get_closest_marker("shares")
        return mark.args[0] if mark else ""

    groups: dict[str, list] = {}
    for item in items:
        if shared(item):
            groups.setdefault(shared(item), []).append(item)
    # units placed first, longest first: each long test alone, each shared group whole
    units = [[i] for i in items if seconds(i) and not shared(i)] + list(groups.values())
    weight = {id(u): sum(seconds(i) or TEST_SECONDS for i in u) for u in units}
    units.sort(key=lambda u: weight[id(u)], reverse=True)
    placed = {id(i) for u in units for i in u}
    rest = [i for i in items if id(i) not in placed]
    lanes: list[list] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for unit in units:
        lane = loads.index(min(loads))
        lanes[lane] += unit
        loads[lane] += weight[id(unit)]
    ordered, remaining = [], len(items)
    for k, lane in enumerate(lanes):
        size = remaining // (workers - k)  # how many worksteal hands worker k first
        take = max(0, size - len(lane))
        ordered += lane + rest[:take]
        rest = rest[take:]
        remaining -= size
    items[:] = ordered + rest


def pytest_configure(config):
    # A derandomized profile would draw its fixed stream whatever seed is
    # asked for: with --hypothesis-seed, the seed wins (on every xdist worker,
    # which gets the same option).
    if config.getoption("hypothesis_seed", None) is not None and settings.default.derandomize:
        settings.register_profile(f"{PROFILE}-seeded", parent=settings.get_profile(PROFILE), derandomize=False)
        settings.load_profile(f"{PROFILE}-seeded")


def pytest_report_header(config):
    return (f"tier: {'nightly' if PROFILE in NIGHTLY_PROFILES else 'ci (tests marked nightly deselected)'}; "
            f"Hypothesis profile {PROFILE}, max_examples={settings.default.max_examples}")
