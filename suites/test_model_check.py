"""``python -m harness check MODULE:FACTORY``: a model through the oracles
that apply, a report folder like a campaign's, and a repro that rebuilds the
model from its factory."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from harness.model import FactoryError, model_config, run_model
from harness.outcome import RunConfig
from oracles.registry import judge
from harness.model import MODEL_ORACLES
from harness import warm


NOT_IN_A_STACK = ("model:sequence", "model:dropout")  # no token ids to shorten, no dropout


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return warm.run(["-m", "harness", "check", *args], cwd=cwd or Path(__file__).parent.parent, timeout=300)


# The same model through every oracle as the command line's run below, in process (14 s): nightly since issue
# 42's cut to six minutes; the command's summary shows the same verdicts and invoke_subgraph calls
@pytest.mark.nightly
def test_a_model_with_repeated_layers_passes_every_oracle_and_is_deduplicated():
    outcome = run_model("suites.model_factories:stack")
    assert outcome.capture.invoke_subgraph_calls >= 3
    verdicts = judge(outcome, MODEL_ORACLES)
    assert [v.oracle for v in verdicts] == list(MODEL_ORACLES)
    assert all(v.status.value == "pass" for v in verdicts), [str(v) for v in verdicts if v.status.value != "pass"]


def test_keyword_inputs_made_by_a_callable_run_too():
    # the compile alone (1 s, not 9 with every companion and change): what reads keyword inputs is the call
    outcome = run_model("suites.model_factories:stack_kwargs", RunConfig(backend="aot_eager", companions=(), variants=0))
    assert outcome.compiled.failure is None and outcome.compiled.outputs


@pytest.mark.parametrize("spec, message", [
    ("suites.model_factories", "expected package.module:name"),
    ("suites.model_factories:missing", "has no callable 'missing'"),
    ("no_such_module_here:f", "importing no_such_module_here raised ModuleNotFoundError"),
    ("suites.model_factories:not_a_pair", "expected (model, inputs)"),
])
def test_a_bad_factory_is_one_clear_error(spec, message, tmp_path):
    with pytest.raises(FactoryError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_model(spec)
    done = _cli(spec, "--out", str(tmp_path))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr


@pytest.mark.long(seconds=15)
def test_a_planted_backend_fault_is_a_finding_whose_repro_rebuilds_the_model(tmp_path):
    planted = "suites.planted_pass:arguments_swapped__aot_eager"  # the pass swaps a subgraph call's arguments
    done = _cli("suites.model_factories:stack", "--backend", planted, "--out", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    sigs = [f["signature"] for f in summary["findings"]]
    assert any(s.startswith("differential:crash:dedup:") for s in sigs), sigs
    finding = next(f for f in summary["findings"] if f["oracle"] == "differential")
    repro = tmp_path / finding["folder"] / "repro.py"
    ran = warm.run([str(repro)], timeout=300)
    assert ran.returncode == 1 and "REPRODUCED" in ran.stdout, ran.stdout + ran.stderr
    # and on the honest backend the same repro reads not reproduced
    honest = repro.read_text().replace(repr(planted), "'aot_eager'")
    (tmp_path / "honest.py").write_text(honest)
    ran = warm.run([str(tmp_path / "honest.py")], timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "(none)" not in (tmp_path / "report.md").read_text()


# Nightly since issue 42's cut to six minutes (27 s: every oracle and every change of the model, and the page in a browser): the
# command's run, its summary and its repro stay in the gate through the planted fault's test above
@pytest.mark.nightly
def test_a_factory_file_by_path_writes_a_report_page(tmp_path):
    done = _cli("suites/model_factories.py:stack", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(v["status"] == "pass" for v in summary["verdicts"].values()), summary["verdicts"]
    assert list(summary["verdicts"]) == list(MODEL_ORACLES) and summary["invoke_subgraph_calls"] >= 3, summary
    from harness.model_changes import MODEL_CHANGES

    assert [c["kind"] for c in summary["changes"]] == list(MODEL_CHANGES)
    # a stack of floats has no token ids to shorten, nor a dropout
    assert all(c["status"] == "pass" or c["kind"] in NOT_IN_A_STACK and c["status"] == "invalid"
               for c in summary["changes"]), summary["changes"]
    page = (tmp_path / "report.html").read_text()
    assert page.count('<tr class="verdict">') == len(MODEL_ORACLES)
    assert page.count('<tr class="change">') == len(MODEL_CHANGES) and "src=" not in page

    from suites.test_html_report import CHROMIUM, _chromium

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: the page was checked as text only")
    dumped = _chromium("--dump-dom", (tmp_path / "report.html").as_uri(), profile=tmp_path / "profile")
    assert dumped.returncode == 0 and "Model check: suites/model_factories.py:stack" in dumped.stdout
    assert dumped.stdout.count('class="change"') == len(MODEL_CHANGES)


# Nightly since issue 42's cut to six minutes (16 s): the recompile oracle's planted fault on a program stays in the gate
# (test_guard_oracle), and the model's changed calls in the command's run above
@pytest.mark.nightly
def test_a_model_that_changes_its_own_state_recompiles_without_a_finding(monkeypatch):
    # the changed calls alone: what the recompile oracle reads (no companions: 6 s, not 13)
    config = replace(model_config(), companions=())
    outcome = run_model("suites.model_factories:labelled", config)
    again = next(r for r in outcome.capture.variants if r.variant["kind"] == "model:again")
    assert again.recompiled and "problem_type" in again.variant["explained"]
    assert judge(outcome, ["recompiles"])[0].status.value == "pass"
    # planted: the same recompile, unexplained, is the recompile oracle's finding
    import harness.model

    monkeypatch.setattr(harness.model, "own_state_changes", lambda model, args, kwargs: [])
    verdict = judge(run_model("suites.model_factories:labelled", config), ["recompiles"])[0]
    assert verdict.failed and verdict.kind == "recompile" and "model:again" in verdict.where


# Nightly since issue 42's cut to six minutes (10 s), with the zoo's models (test_model_zoo): the model check's planted fault and
# its repro stay in the gate (test_a_planted_backend_fault_is_a_finding_whose_repro_rebuilds_the_model)
@pytest.mark.nightly
def test_the_zoo_table_names_each_mode_and_fails_on_a_planted_fault():
    from campaigns import zoo

    honest = zoo.run("suites.model_factories:stack", "aot_eager")
    assert not zoo.unknown(honest) and honest["invoke_subgraph_calls"] >= 3
    assert all(m["status"] == "pass" for k, m in honest["modes"].items() if k not in NOT_IN_A_STACK), honest["modes"]
    assert all(honest["modes"][k]["status"] == "invalid" for k in NOT_IN_A_STACK)
    row = zoo.table([honest]).splitlines()[-1]
    assert row.startswith("| stack | aot_eager | ") and row.count("pass") == len(honest["modes"]) - 1
    # planted, in a process of its own: a planted Dynamo fault must never be resolved in the test process
    # (it patches the pass for every later test of this worker)
    done = warm.run(["-m", "harness", "zoo", "suites.model_factories:stack", "--backend",
                     "suites.planted_pass:arguments_swapped__aot_eager", "--first-call-only"],
                    cwd=Path(__file__).parent.parent, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("| stack | suites.planted_pass:") and "| NEW |" in done.stdout


# 16 s: the completeness oracle's planted faults run in the gate on programs (test_structural_oracles)
# and a model finding's repro rebuilding the model in test_a_planted_backend_fault_is_a_finding...
@pytest.mark.nightly
def test_a_planted_pass_that_merges_nothing_is_a_completeness_finding(tmp_path):
    planted = "suites.planted_pass:regions_dropped__aot_eager"  # the tracker finds no region
    done = _cli("suites.model_factories:stack", "--backend", planted, "--out", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    finding = next(f for f in summary["findings"] if f["oracle"] == "completeness")
    assert finding["signature"] == "completeness:missed_merge:dedup:missed:model_layers", finding
    assert "layers (3 alike)" in summary["verdicts"]["completeness"]["message"]
    repro = tmp_path / finding["folder"] / "repro.py"
    ran = warm.run([str(repro)], timeout=300)
    assert ran.returncode == 1 and "merged nothing" in ran.stdout, ran.stdout + ran.stderr
    (tmp_path / "honest.py").write_text(repro.read_text().replace(repr(planted), "'aot_eager'"))
    ran = warm.run([str(tmp_path / "honest.py")], timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_dropout_is_judged_only_where_the_backend_draws_eagers_random_numbers():
    from harness.model_changes import MODEL_CHANGES, draws_like_eager
    from harness.outcome import RunConfig

    assert draws_like_eager("aot_eager")  # the same aten ops on the same generator
    judged = MODEL_CHANGES["model:dropout"].judged
    assert judged(RunConfig(backend="aot_eager")) == ""
    # planted: a backend drawing its own numbers (a dropout mask of its own) is found by asking it
    assert not draws_like_eager("suites.model_factories:own_random_backend")
    assert "draws its own random numbers" in judged(RunConfig(backend="suites.model_factories:own_random_backend"))


def test_asking_a_backend_about_random_numbers_keeps_the_models_cache_entries(monkeypatch):
    """Asked between a model's re-calls (before the dropout change), the
    probe must not reset Dynamo: that dropped the entries the later shape
    changes recompile from, and hid KI-041 behind fresh static compiles."""
    import torch

    import harness.model_changes

    monkeypatch.setattr(harness.model_changes, "_DRAWS", {})
    compiles = []

    def counting(gm, example_inputs):
        compiles.append(gm)
        return gm

    fn = torch.compile(lambda x: x.sin() + 1, backend=counting)
    x = torch.randn(3)
    fn(x)
    assert harness.model_changes.draws_like_eager("aot_eager")
    fn(x)
    assert len(compiles) == 1, "the probe dropped the compiled entry"
    torch._dynamo.reset()
