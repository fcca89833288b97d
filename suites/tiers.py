"""Which tier this run is: the CI gate (``make test``) or the nightly tier (``make nightly``).

HYPOTHESIS_PROFILE names both the Hypothesis profile and the tier (suites/conftest.py registers the
profiles). A test that checks one case in the gate and every case nightly asks ``nightly()``; one that
only runs nightly is marked ``nightly`` instead.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# The profiles that run the nightly tier's tests.
NIGHTLY_PROFILES = ("nightly", "fuzz")


def nightly() -> bool:
    return PROFILE in NIGHTLY_PROFILES


def ci_profile() -> bool:
    """Whether the gate's own profile ("ci") sizes this run's properties: not the smoke profile's five examples,
    nor the nightly tier's counts (a property sized from the profile's count takes its gate figure here)."""
    return settings.default.max_examples == settings.get_profile("ci").max_examples


def examples(gate: int, nightly_count: int) -> int:
    """A property's example count: ``gate`` in the CI gate, ``nightly_count`` in the nightly tier."""
    return nightly_count if nightly() else gate
