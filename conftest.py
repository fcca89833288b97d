"""Shared pytest setup: Hypothesis profiles, torch state, planted-fault backends.

Profiles are chosen by HYPOTHESIS_PROFILE: ``ci`` (the default: derandomized,
fixed example counts, no deadline, no example database) and ``fuzz`` (long,
random runs that keep their database).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", derandomize=True, max_examples=200, deadline=None, database=None,
    suppress_health_check=_SLOW_OK, print_blob=True,
)
settings.register_profile("fuzz", max_examples=3000, deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# One intra-op thread per pytest worker: the workers are the parallelism.
torch.set_num_threads(1)
warnings.filterwarnings("ignore", message=".*invoke_subgraph traced multiple backward graphs.*")


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
