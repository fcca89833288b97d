"""Shared pytest setup: Hypothesis profiles, torch state, planted-fault backends.

Profiles are chosen by HYPOTHESIS_PROFILE: ``ci`` (the default: derandomized, no shrinking,
fixed example counts, no deadline, no example database) and ``fuzz`` (long,
random runs that keep their database).
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
# CI fails at once on a new finding, printing its program and repro: no shrink
# phase (Hypothesis spent 5+ minutes shrinking one failure, past the suite's
# time budget); minimizing is the campaign's job (reports/minimize.py).
settings.register_profile(
    "ci", derandomize=True, max_examples=200, deadline=None, database=None,
    suppress_health_check=_SLOW_OK, print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.register_profile("fuzz", max_examples=3000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

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


# --- known-issue hits: workers append, the controller prints a summary -------
HITS_ENV = "DEDUP_HARNESS_KNOWN_HITS"


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        os.environ[HITS_ENV] = tempfile.mkdtemp(prefix="known-hits-")


def record_known_hit(issue_id: str, signature: str) -> None:
    folder = os.environ.get(HITS_ENV)
    if folder:
        with open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps({"issue": issue_id, "signature": signature}) + "\n")


def pytest_terminal_summary(terminalreporter):
    folder = os.environ.get(HITS_ENV)
    if not folder or hasattr(terminalreporter.config, "workerinput"):
        return
    hits = collections.Counter()
    for path in Path(folder).glob("*.jsonl"):
        for line in path.read_text().splitlines():
            d = json.loads(line)
            hits[(d["issue"], d["signature"])] += 1
    if hits:
        terminalreporter.section("known torch issues hit by the property suites")
        for (issue, signature), n in sorted(hits.items()):
            terminalreporter.write_line(f"{n:5d}x {issue}  {signature}")
