"""The model zoo's inductor share (``campaigns.zoo`` as in test_model_zoo.py).
Apart from ``-m models`` so the zoo's aot_eager run stays short; the
nightly tier runs it (``make nightly``, or ``HYPOTHESIS_PROFILE=nightly pytest
suites/ -m inductor``). Every model tried on inductor (BERT, GPT-2,
Llama) gets wrong gradients on its first call with deduplication (KI-044), and
no later call can be judged after a wrong first one, so CI compiles the first
call only, on a model other than KI-044's repro's; ``python -m harness zoo
MODEL --backend inductor`` re-calls every mode."""

from __future__ import annotations

import pytest

from campaigns import zoo
from suites.test_model_zoo import assert_named, needs_transformers

INDUCTOR = ("bert",)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@needs_transformers
@pytest.mark.inductor
@pytest.mark.nightly  # inductor beyond a sample: the property suite and KI-044/045/046's repros are CI's share
@pytest.mark.long(seconds=30)
@pytest.mark.parametrize("family", INDUCTOR)
def test_a_zoo_model_on_inductor(family):
    assert_named(zoo.run(f"{zoo.ZOO}:{family}", "inductor", changes=False))
