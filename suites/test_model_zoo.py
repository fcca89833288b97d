"""The model zoo: tiny configurations of real architectures from
``transformers`` (``campaigns/zoo_models.py``: random weights, built offline) compiled
with deduplication, right in forward and backward against eager and the
float64 referee on the first call and after every change of mode and shape
(new values, train(), no_grad, bfloat16 autocast, batch, sequence), each
judged on its own (``campaigns.zoo``). A failure no known issue names fails.

``pytest suites/ -m models`` runs the zoo alone (aot_eager); inductor's share
is ``test_model_zoo_inductor.py``."""

from __future__ import annotations

import importlib.util
import json

import pytest

from campaigns import zoo
from reports.known_issues import MODEL_ROOT
from harness import warm

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
NO_TRANSFORMERS = "transformers is not installed: pip install -e .[models] (make test does)"
pytestmark = pytest.mark.models
needs_transformers = pytest.mark.skipif(not HAS_TRANSFORMERS, reason=NO_TRANSFORMERS)

# Decoder-only, encoder-only, encoder-decoder and vision. t5_eager_attention
# is left to `python -m harness zoo`: its KI-001 is T5's too, and it costs
# four times as much. The CI gate runs one architecture of each kind (T5 for
# its model-scoped known issue; OPT for the decoders, 11 s where llama takes 20);
# the nightly tier runs the rest.
FAMILIES = ("llama", "mistral", "qwen2", "gemma", "phi3", "opt", "gpt2", "bert", "bart", "t5", "vit", "convnext",
            "resnet")
# T5 went nightly with issue 45's gate trim: its model-scoped known issue keeps its repro in the gate
# (test_a_model_issue_reproduces)
# OPT went nightly with issue 42's cut to six minutes (39 s on a machine whose bare loop is 0.34 s a program):
# the gate keeps a transformers model through KI-045's repro (test_a_model_issue_reproduces), and the zoo's
# table of modes through test_model_check's planted fault on a model of repeated layers.
CI_FAMILIES: tuple[str, ...] = ()  # every family: the nightly tier
MODEL_ISSUES = sorted(MODEL_ROOT.glob("*/repro.py"))


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def assert_named(result: dict) -> None:
    assert result["modes"]["first call"]["status"] == "fail" or result["invoke_subgraph_calls"] >= 2, \
        f"repeated layers, yet {result['invoke_subgraph_calls']} invoke_subgraph calls"
    if result["modes"]["first call"]["status"] == "pass" and len(result["modes"]) > 1:
        judged = [m for m in result["modes"].values() if m["status"] not in ("invalid", "not judged")]
        assert len(judged) >= 4, result["modes"]
    new = zoo.unknown(result)
    assert not new, "failures no known issue names:\n" + "\n".join(new) + "\n\n" + zoo.table([result])


@needs_transformers
@pytest.mark.long(seconds=18)
@pytest.mark.parametrize("family", [f if f in CI_FAMILIES else pytest.param(f, marks=pytest.mark.nightly)
                                    for f in FAMILIES])
def test_a_zoo_model_is_right_in_every_mode_or_fails_on_a_known_issue(family):
    assert_named(zoo.run(f"{zoo.ZOO}:{family}", "aot_eager"))


# The slowest model repros run nightly (KI-041's dynamic llama and KI-046's inductor, about 18 s each; KI-001's
# and KI-043's, 10 to 12 s): on the pinned torch they change only with the repro template, whose model path
# KI-045's repro keeps in the gate (3 s).
NIGHTLY_REPROS = ("KI-001", "KI-041", "KI-043", "KI-046")


@pytest.mark.known_issue
@pytest.mark.parametrize("repro", [pytest.param(p, marks=pytest.mark.nightly) if p.parent.name.startswith(NIGHTLY_REPROS)
                                   else p for p in MODEL_ISSUES],
                         ids=["-".join(p.parent.name.split("-")[:2]) for p in MODEL_ISSUES])
def test_a_model_issue_reproduces(repro):
    """As the program baseline's: a repro that stops reproducing says the
    issue appears fixed (record the release); 2 is a torch without the feature."""
    issue = json.loads((repro.parent / "issue.json").read_text())
    if issue.get("repro") == "model" and not HAS_TRANSFORMERS:
        pytest.skip(NO_TRANSFORMERS)
    done = warm.run([str(repro)], timeout=600)
    said = (done.stdout[-1500:] + done.stderr[-1500:]).strip()
    if done.returncode == 2:
        pytest.skip(f"{issue['id']}: {said}")
    assert done.returncode != 0, f"{issue['id']} appears fixed in this torch: its repro.py exits 0 ({said}); " \
                                 "record the release in its issue.json"
    assert done.returncode == 1, f"{issue['id']}: repro.py exited {done.returncode}: {said}"
