"""The model zoo's inductor share (``reports.zoo`` as in test_model_zoo.py):
one model, every mode, on inductor. Apart from ``-m models`` so the zoo's
aot_eager run stays short; ``pytest suites/ -m inductor`` has it."""

from __future__ import annotations

import pytest

from reports import zoo
from suites.test_model_zoo import assert_named, needs_transformers

INDUCTOR = ("gpt2",)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@needs_transformers
@pytest.mark.inductor
@pytest.mark.long(seconds=100)
@pytest.mark.parametrize("family", INDUCTOR)
def test_a_zoo_model_on_inductor(family):
    assert_named(zoo.run(f"{zoo.ZOO}:{family}", "inductor"))
