"""The OpInfo sweep (issue 46): torch's operator database as cases in every
spelling, batches of repeated blocks judged once, a failing batch narrowed
to its case, the sweep's place in a campaign, op coverage in the reports,
and planted one-place faults (suites/planted_ops.py) found where they are
and nowhere else."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from campaigns.op_sweep import BATCH, REGION_EVERY, Sweep, judge_locally, stage
from campaigns.sweep_task import run_batch
from campaigns.worker import config_to
from generators.check import check
from generators.codegen import render
from generators.ir import from_dict, to_dict
from generators.opinfo import Case, cases_of, sweep_program
from harness.opinfo_db import database, select
from oracles.registry import run_config
from reports import op_coverage
from suites.planted_ops import FAULTS
from suites.tiers import nightly

pytestmark = pytest.mark.skipif(database() is None, reason="this torch ships no OpInfo database")

OPS = ("add", "sin", "nn.functional.relu", "max.reduction_with_dim", "cumprod")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return select(OPS)


def _config(backend: str = "aot_eager", **kw) -> dict:
    from dataclasses import replace

    return config_to(replace(run_config(backend, ("differential",)), **kw))


def _by(cases, **want) -> list[Case]:
    return [c for c in cases if all(getattr(c, k) == v for k, v in want.items())]


# -- the cases ------------------------------------------------------------------------------------


def test_cases_carry_every_spelling_the_op_has_and_round_trip(cases):
    kinds = {c.kind for c in _by(cases, op="add", dtype="float32")}
    assert kinds == {"torch", "method", "inplace", "operator", "aten", "out"}, kinds
    assert "functional" in {c.kind for c in _by(cases, op="nn.functional.relu")}
    items = {(c.item, c.out.dtype) for c in _by(cases, op="max.reduction_with_dim", kind="torch", dtype="float32")}
    assert {(0, "float32"), (1, "int64")} <= items, items  # a tuple output: one case per item
    assert {"float32", "float64", "bfloat16", "float16", "int64"} <= {c.dtype for c in _by(cases, op="add")}
    assert all(Case.from_dict(json.loads(json.dumps(c.to_dict()))) == c for c in cases)
    # gradients where the op has one and the spelling allows it (never into out=)
    assert any(t.requires_grad for c in _by(cases, op="sin", kind="torch", dtype="float32") for t in c.tensors)
    assert not any(t.requires_grad for c in _by(cases, kind="out") for t in c.tensors)


def test_each_spelling_computes_what_the_function_computes(cases):
    """The builder kept a spelling only where eager agreed; checked again here, independently, from the
    cases' own values: a case is valid by construction."""
    def run(case):
        ts = [torch.tensor(t.data, dtype=getattr(torch, t.dtype)).reshape(t.shape) for t in case.tensors]
        env = {"torch": torch, "F": torch.nn.functional}
        return eval(case.fmt.format(*(f"_t{i}" for i in range(len(ts)))), env, {f"_t{i}": t for i, t in enumerate(ts)})

    groups = defaultdict(list)
    for c in cases:
        groups[(c.op, c.dtype, c.sample, c.item)].append(c)
    for key, group in groups.items():
        first = run(group[0])
        for other in group[1:]:
            got = run(other)
            assert got.shape == first.shape and got.dtype == first.dtype, (key, other.kind)
            assert torch.equal(got.nan_to_num(0.0) if got.is_floating_point() else got,
                               first.nan_to_num(0.0) if first.is_floating_point() else first), (key, other.kind)


def test_a_sweep_program_is_a_plain_value_that_renders(cases):
    group = [c for c in cases if c.out.dtype == "float32" and c.sample == 0][:6]
    program = sweep_program(group, region=True)
    check(program)
    assert from_dict(to_dict(program)) == program and cases_of(from_dict(to_dict(program))) == group
    source = render(program)
    assert "@torch.compiler.nested_compile_region" in source and "torch.tensor((" in source
    assert all(c.fmt.split("(")[0].split("}")[-1] in source for c in group)
    with pytest.raises(ValueError, match="share their output dtype"):
        sweep_program(group + [c for c in cases if c.out.dtype == "int64"][:1])


# -- the driver (no compile) ----------------------------------------------------------------------


def test_the_sweep_goes_by_stage_batches_by_output_dtype_and_resumes(cases, tmp_path):
    sweep = Sweep(tmp_path, batch=4)
    sweep.add(cases)
    seen = []
    while (picked := sweep.next_batch()) is not None:
        batch, region = picked
        assert 1 <= len(batch) <= 4 and len({c.out.dtype for c in batch}) == 1
        assert region == ((sweep.batches + 1) % REGION_EVERY == 0)  # one batch in REGION_EVERY, by turn
        seen += batch
        sweep.judged(sweep.program(batch, region), {"runs": [{"label": "main", "status": "pass"}]})
    # every cell once (its first sample, every item), stage by stage
    assert {c.cell for c in seen} == {c.cell for c in cases}
    stages = [stage(c, "torch") for c in seen if c.op == "add"]
    assert stages == sorted(stages) and stages[0] == 0, stages
    assert sweep.done and all(e["status"] == "passed" for e in sweep.cells.values())
    sweep.save()
    again = Sweep(tmp_path, batch=4)
    again.add(cases)
    assert again.next_batch() is None and again.table()["counts"]["passed"] == len(sweep.cells)


def test_a_region_batch_is_a_small_one(cases, monkeypatch):
    """A region batch meets a known crash on torch 2.13 and is judged twice past it: at a plain batch's size it
    cost up to seven plain ones."""
    from campaigns import op_sweep

    monkeypatch.setattr(op_sweep, "REGION_BATCH", 4)  # the fixture's few ops make small batches
    sweep = Sweep(None, batch=16)
    sweep.add(cases)
    sizes = {True: [], False: []}
    while (picked := sweep.next_batch()) is not None:
        sizes[picked[1]].append(len(picked[0]))
        sweep.judged(sweep.program(*picked), {"runs": [{"label": "main", "status": "pass"}]})
    assert sizes[True] and max(sizes[True]) <= 4 < max(sizes[False])


def test_spellings_but_the_simplest_are_judged_forward_only_in_batches_of_their_own(cases):
    sweep = Sweep(None, batch=8)
    sweep.add(cases)
    train, forward = _config(), []
    while (picked := sweep.next_batch()) is not None:
        batch, _ = picked
        simplest = [c.kind == sweep.default_kind[c.op] for c in batch]
        assert all(simplest) or not any(simplest), [c.cell for c in batch]
        config = sweep.batch_config(batch, train)
        assert config["mode"] == ("train" if all(simplest) else "no_grad")
        forward += [c.kind for c in batch if not simplest[0]]
        sweep.judged(sweep.program(batch), {"runs": [{"label": "main", "status": "pass"}]})
    assert {"method", "aten"} <= set(forward) and sweep.default_kind["add"] == "torch"
    # a backend that cannot train is judged as it runs
    assert sweep.batch_config(_by(cases, op="add", kind="method")[:1], {**train, "mode": "inference_mode"})["mode"] \
        == "inference_mode"
    # forward only, a wrong spelling is still found (a planted backend computing lerp wrong as a method)
    method = [c for c in select(("lerp",)) if c.kind == "method" and c.dtype == "float32"][:4]
    wrong = run_batch({"program": sweep.program(method, False),
                       "config": sweep.batch_config(method, _config("suites.planted_ops:method_lerp"))})
    assert wrong["runs"][0]["status"] == "fail", wrong


def test_a_fault_in_a_region_body_is_seen_with_every_oracle_on():
    """The rewrite oracle runs the post-pass graph eagerly inside the compile; its invoke_subgraph kept what
    it traced in the compile's HOP cache, and the backend's region body (here made wrong, planted) was never
    compiled: a campaign's ordinary run, every oracle on, passed where the sweep's differential run failed."""
    from harness.pipeline import run_program
    from oracles import differential

    sinh = [c for c in select(("sinh",)) if c.kind == "torch" and c.dtype == "float32"][:1]
    program = from_dict(Sweep(None).program(sinh, False))
    outcome = run_program(program, run_config("suites.planted_ops:region_sinh"))
    assert outcome.capture.deduplicated and outcome.config.record_structure
    assert differential.check(outcome).kind == "mismatch"


def test_a_failing_batch_is_narrowed_to_its_case(cases):
    sweep = Sweep(None, batch=BATCH)
    sweep.add(_by(cases, dtype="float32"))
    batch, _ = sweep.next_batch()
    program = sweep.program(batch)
    # a wrong value names its case: it alone runs as an ordinary program, the rest is judged again
    follow = sweep.judged(program, {"runs": [{"label": "main", "status": "fail", "kind": "value", "blame": 2}]})
    assert len(follow) == 1 and cases_of(from_dict(follow[0]["single"])) == [batch[2]]
    rest, _ = sweep.pending.pop()
    assert rest == batch[:2] + batch[3:]
    # a crash names none: halves, down to one case
    follow = sweep.judged(sweep.program(rest), {"runs": [{"label": "main", "status": "fail", "kind": "crash"}]})
    assert not follow and [len(h) for h, _ in sweep.pending] == [len(rest) - len(rest) // 2, len(rest) // 2]
    # a recorded crash no run could get past is narrowed too, and its case is the known issue's
    one = sweep.program([batch[0]])
    assert sweep.judged(one, {"runs": [{"label": "main", "status": "fail", "kind": "crash", "masked": "KI-000"}]}) == []
    assert sweep.cells[batch[0].cell] == {"status": "known", "reason": "KI-000"}
    # its ordinary run's findings are the cell's
    sweep.single_judged(sweep.program([batch[3]]), [{"signature": "differential:mismatch:x", "known_issue": None}])
    assert sweep.cells[batch[3].cell]["status"] == "failed"


def test_a_batch_failing_only_whole_runs_whole_as_an_ordinary_program(cases):
    """A crash that needs cases from both halves (KI-131: add into out= beside a case whose input requires
    grad) is not lost when each half passes: the batch runs whole, its findings kept apart from any one cell."""
    sweep = Sweep(None, batch=4)
    sweep.add(_by(cases, dtype="float32"))
    batch, _ = sweep.next_batch()
    crash = {"runs": [{"label": "main", "status": "fail", "kind": "crash", "message": "TypeError"}]}
    assert sweep.judged(sweep.program(batch), crash) == []
    first, _ = sweep.pending.pop()
    assert sweep.judged(sweep.program(first), {"runs": [{"label": "main", "status": "pass"}]}) == []
    second, _ = sweep.pending.pop()
    follow = sweep.judged(sweep.program(second), {"runs": [{"label": "main", "status": "pass"}]})
    assert len(follow) == 1 and follow[0]["combination"]
    assert cases_of(from_dict(follow[0]["single"])) == batch
    sweep.single_judged(follow[0]["single"], [{"signature": "differential:crash:x", "known_issue": "KI-131"}])
    assert sweep.combinations == [{"cells": sorted({c.cell for c in batch}), "findings": ["KI-131"]}]
    assert all(sweep.cells[c.cell]["status"] == "passed" for c in batch)
    # a half that fails explains its batch: nothing runs whole
    again = Sweep(None, batch=4)
    again.add(_by(cases, dtype="float32"))
    batch, _ = again.next_batch()
    again.judged(again.program(batch), crash)
    first, _ = again.pending.pop()
    again.judged(again.program(first), crash)
    second, _ = [h for h in again.pending if h[0] != first[:len(first) // 2] and h[0] != first[len(first) // 2:]][0]
    again.pending = [h for h in again.pending if h[0] is not second]
    assert again.judged(again.program(second), {"runs": [{"label": "main", "status": "pass"}]}) == []


def test_a_batch_that_forms_no_region_is_halved_until_its_graph_breaking_case(cases):
    """A case that breaks the graph (tensor_split at a tensor of indices) keeps every case of its batch out of
    a region: the batch is halved, not passed; the case alone is judged where it is, its op's cells go last."""
    sweep = Sweep(None, batch=4)
    sweep.add(_by(cases, dtype="float32"))
    batch, _ = sweep.next_batch()
    outside = {"runs": [{"label": "main", "status": "pass", "placed": False}]}
    assert sweep.judged(sweep.program(batch), outside) == [] and len(sweep.pending) == 2
    assert all(sweep.cells[c.cell]["status"] == "untried" for c in batch)
    for half, _ in list(reversed(sweep.pending)):
        sweep.pending.pop()
        assert sweep.judged(sweep.program(half), {"runs": [{"label": "main", "status": "pass", "placed": True}]}) == []
    assert all(sweep.cells[c.cell]["status"] == "passed" for c in batch)  # and nothing ran whole
    one, _ = sweep.next_batch()
    assert sweep.judged(sweep.program(one[:1]), outside) == []
    assert "breaks the graph" in sweep.cells[one[0].cell]["reason"]
    assert all(item[0][0] == 99 for item in sweep.queue if item[2].op == one[0].op)


def test_the_case_that_breaks_the_graph_is_named_from_the_graphs():
    """The statement no graph assigns is the case that ran in Python (a real compile), so the rest of the
    batch is judged again in a region at the cost of one batch, not a halving."""
    from campaigns.sweep_task import outside, run_batch

    chosen = [c for c in select(("sin", "tensor_split", "cos")) if c.dtype == "float32" and c.kind == "torch"]
    chosen = [next(c for c in chosen if c.op == o) for o in ("sin", "tensor_split", "cos")]
    program = to_dict(sweep_program(chosen))
    main = run_batch({"program": program, "config": _config()})["runs"][0]
    assert main["placed"] is False and main["outside"] == [1], main
    sweep = Sweep(None, batch=BATCH)
    sweep.add(chosen)
    assert sweep.judged(program, {"runs": [main]}) == []
    assert [[c.op for c in cs] for cs, _ in sweep.pending] == [["sin", "cos"], ["tensor_split"]]
    assert outside(from_dict(program), ["v0 = torch.sin(x)", "v1_1 = y[0]\n    v2 = torch.cos(z)"]) == []


def test_cells_expected_to_fail_go_last_in_small_batches(cases):
    """A cell a record says fails, and the other dtypes of a spelling met by a known issue, are judged after
    every other cell, a few at a time: in a large batch one of them fails it, and halving costs compiles."""
    from campaigns.op_sweep import DEFERRED_BATCH

    recorded = "cumprod|torch|float32"
    sweep = Sweep(None, batch=BATCH, deferred=frozenset({recorded}))
    sweep.add(cases)
    order, sizes = [], {}
    while (picked := sweep.next_batch()) is not None:
        batch, _ = picked
        order += [c.cell for c in batch]
        for c in batch:
            sizes[c.cell] = len(batch)
        if any(c.op == "add" and c.kind == "method" and c.dtype == "float32" for c in batch):
            # the spelling meets a known crash alone: its other dtypes queued go last
            met = next(c for c in batch if c.op == "add" and c.kind == "method" and c.dtype == "float32")
            sweep.judged(sweep.program([met]), {"runs": [{"label": "main", "status": "fail", "kind": "crash",
                                                          "masked": "KI-000"}]})
            batch = [c for c in batch if c is not met]
        if batch:
            sweep.judged(sweep.program(batch), {"runs": [{"label": "main", "status": "pass"}]})
    deferred = {recorded} | {c for c in order if c.startswith("add|method|") and not c.endswith("float32")}
    assert len(deferred) > 1 and all(sizes[c] <= DEFERRED_BATCH for c in deferred)
    assert max(order.index(c) for c in order if c not in deferred) < min(order.index(c) for c in deferred)
    assert sweep.cells["add|method|float32"]["status"] == "known"


def test_shards_split_the_cells_and_the_probe_rules_out_dtypes(cases):
    shards = [Sweep(None, shard=(i, 3)) for i in range(3)]
    for s in shards:
        s.add(cases)
    cells = [set(s.cells) for s in shards]
    assert set().union(*cells) == {c.cell for c in cases} and sum(map(len, cells)) == len({c.cell for c in cases})
    probed = Sweep(None, dtypes=("float32", "bfloat16"), unsupported_dtypes={"float64": "probe: no float64"})
    probed.add(cases)
    f64 = [e for cell, e in probed.cells.items() if cell.endswith("|float64")]
    assert f64 and all(e == {"status": "unsupported", "reason": "probe: no float64"} for e in f64)
    assert not any(c.dtype == "float64" for _, _, c in probed.queue)
    # a backend computing float32 in bfloat16: what rounding decides (indices, comparisons) is not judged
    lower = Sweep(None, precision={"float32": "bfloat16"})
    lower.add(cases)
    queued = [c for _, _, c in lower.queue]
    assert not any(c.dtype == "float32" and c.out.dtype == "int64" for c in queued)
    assert any(c.op == "max.reduction_with_dim" and c.dtype == "float32" and c.item == 0 for c in queued)
    assert any(c.op == "max.reduction_with_dim" and c.dtype == "float64" and c.item == 1 for c in queued)


# -- judged by torch ------------------------------------------------------------------------------


# Nightly since issue 42's cut to six minutes (8 s), with inductor's sweep: the gate judges the sweep's batches through its planted
# faults, whose honest halves pass (the region fault without deduplication)
@pytest.mark.nightly
def test_the_sweep_has_no_false_alarm_on_aot_eager(cases):
    chosen = [c for c in cases if c.dtype in ("float32", "int64")]  # every dtype in the nightly conformance run
    cells = judge_locally(chosen, _config())
    bad = {c: e for c, e in cells.items() if e["status"] not in ("passed", "known", "expected")}
    assert not bad, bad


@pytest.mark.inductor
@pytest.mark.nightly  # inductor builds C++ per batch (about a minute here); aot_eager's run is the gate's
def test_the_sweep_has_no_false_alarm_on_inductor(cases):
    chosen = [c for c in cases if c.dtype in ("float32", "int64") and c.op in ("add", "sin", "max.reduction_with_dim")]
    cells = judge_locally(chosen, _config("inductor"))
    bad = {c: e for c, e in cells.items() if e["status"] not in ("passed", "known", "expected")}
    assert not bad, bad


def test_a_wrong_value_is_blamed_on_its_case():
    cases = [c for c in select(("sin", "logaddexp2", "cos")) if c.kind == "aten" and c.dtype == "float32"]
    cases = [next(c for c in cases if c.op == o) for o in ("sin", "logaddexp2", "cos")]
    result = run_batch({"program": to_dict(sweep_program(cases)), "config": _config("suites.planted_ops:aten_logaddexp2")})
    main = result["runs"][0]
    assert main["status"] == "fail" and main["blame"] == 1, main


def test_a_gradient_is_blamed_on_its_case_and_each_case_is_judged_from_one_run():
    """blame reads the names the pipeline gives gradients (``grad[input:c<k>_<j>]``, a repeat's copy
    ``..._<r>``); a batch's run is judged case by case (its slice of the joined outputs, its inputs' gradients),
    so one wrong or unsettled case neither halves the batch nor runs the rest again."""
    from campaigns.sweep_task import blame, per_case
    from harness.pipeline import run_program

    cases = [next(c for c in select((o,)) if c.kind == "torch" and c.dtype == "float32") for o in ("sin", "mul", "cos")]
    program = sweep_program(cases)
    outcome = run_program(program, run_config("suites.planted_ops:torch_hypot", ("differential",)))
    named = {f"grad[{k}]": blame(program, f"grad[{k}]", {}) for k in outcome.eager.grads if k.startswith("input:")}
    assert len(named) == 5 and all(k is not None and f"c{k}_" in w for w, k in named.items()), named
    assert per_case(outcome, program) == ["pass", "pass", "pass"]
    # the joined output's second case made wrong after the run: that case alone fails
    for out in outcome.compiled.outputs[1:]:
        out[16] += 1.0
    assert per_case(outcome, program) == ["pass", "fail", "pass"]
    sweep = Sweep(None, batch=BATCH)
    sweep.add(cases)
    batch, _ = sweep.next_batch()
    run = {"label": "main", "status": "fail", "kind": "mismatch", "cases": ["pass", "fail", "inconclusive"]}
    follow = sweep.judged(sweep.program(batch), {"runs": [run]})
    assert [cases_of(from_dict(f["single"])) for f in follow] == [[batch[1]]] and not sweep.pending
    assert [sweep.cells[c.cell]["status"] for c in batch] == ["passed", "untried", "inconclusive"]


GATE_FAULTS = ("region_sinh",)  # the place only deduplication makes; the campaign test below finds an aten one


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in GATE_FAULTS else pytest.mark.nightly)
                                  for n in FAULTS])  # the others in the nightly tier: each is a few batches
@pytest.mark.long(seconds=12)
def test_a_planted_op_fault_fails_its_cells_and_no_other(name):
    fault = FAULTS[name]
    # the gate's fault on float32 alone (issue 42's cut to six minutes: both dtypes took 19 s on a machine
    # whose bare loop is 0.34 s a program); both in the nightly tier, where a dtype-only fault needs them
    dtypes = ("float32",) if name in GATE_FAULTS and not nightly() else ("float32", "float64")
    cases = [c for c in select((fault.op,)) if c.dtype in dtypes]
    cells = judge_locally(cases, _config(f"suites.planted_ops:{name}"))
    failed = {c for c, e in cells.items() if e["status"] == "failed"}
    if fault.where.startswith("dtype:"):
        expected = {c.cell for c in cases if c.dtype == fault.where.split(":")[1]}
    elif fault.where == "region":
        expected = {c.cell for c in cases}  # every cell: a sweep batch is a deduplicated region
    else:
        expected = {c.cell for c in cases if c.kind == fault.where}
    assert failed == expected and expected, (sorted(failed), sorted(expected))
    if fault.where == "region":  # outside a region (deduplication off) nothing is wrong
        off = judge_locally(cases, _config(f"suites.planted_ops:{name}", dedup=False))
        assert all(e["status"] == "passed" for e in off.values()), off


# -- in a campaign --------------------------------------------------------------------------------


@pytest.mark.nightly  # a campaign of its own (about 30 s); in the gate the driver, blame and faults are judged directly
def test_a_backend_campaign_sweeps_first_and_its_repro_blames_the_backend(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "harness", "fuzz", "--backend", "suites.planted_ops:aten_logaddexp2",
                           "--sweep-ops", "logaddexp2", "--programs", "1", "--budget", "120", "--workers", "1",
                           "--oracles", "differential", "--minimize-seconds", "0", "--no-verify", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    table = summary["op_coverage"]["suites.planted_ops:aten_logaddexp2"]
    status = {c: e["status"] for c, e in table["by_cell"].items()}
    assert status["logaddexp2|aten|float32"] == "failed" and status["logaddexp2|torch|float32"] == "passed", status
    assert table["done"] and status["logaddexp2|method|float32"] == "passed", status
    assert "## Op coverage" in (out / "report.md").read_text() and 'class="heat"' in (out / "report.html").read_text()
    found = [f for f in summary["findings"] if not f["known_issue"]]
    assert found and all("logaddexp2" in (out / f["folder"] / "program.json").read_text() for f in found), found
    repro = (out / found[0]["folder"] / "repro.py").read_text()
    assert subprocess.run([sys.executable, "-c", repro], cwd=ROOT, capture_output=True, timeout=300).returncode == 1
    honest = repro.replace("BACKEND = 'suites.planted_ops:aten_logaddexp2'", "BACKEND = 'aot_eager'")
    assert honest != repro
    assert subprocess.run([sys.executable, "-c", honest], cwd=ROOT, capture_output=True, timeout=300).returncode == 0


@pytest.mark.nightly  # two campaigns of their own (about 30 s); the sweep's state is resumed in the gate above
def test_a_resumed_campaign_skips_a_finished_sweep(tmp_path):
    out = tmp_path / "run"
    args = [sys.executable, "-m", "harness", "fuzz", "--backend", "suites.planted_ops:aten_logaddexp2", "--sweep-ops",
            "sin", "--programs", "1", "--budget", "60", "--workers", "1", "--oracles", "differential", "--out", str(out)]
    for extra in ([], ["--resume"]):
        done = subprocess.run(args + extra, cwd=ROOT, capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    starts = [i for i, e in enumerate(events) if e["event"] == "start"]
    assert len(starts) == 2 and [e for e in events[:starts[1]] if e["event"] == "sweep_batch"]
    assert not [e for e in events[starts[1]:] if e["event"] == "sweep_batch"]


# -- the figure -----------------------------------------------------------------------------------


def test_op_coverage_merges_shards_and_renders():
    a = {"by_cell": {"add|torch|float32": {"status": "passed"}, "sin|aten|float64": {"status": "untried"}},
         "batches": 2, "seconds": 1.0, "done": True}
    b = {"by_cell": {"sin|aten|float64": {"status": "failed", "reason": "differential:mismatch:x"},
                     "relu|functional|float32": {"status": "unsupported", "reason": "probe: no float32"}},
         "batches": 1, "seconds": 2.0, "done": False,
         "combinations": [{"cells": ["add|out|float32", "sin|torch|float32"], "findings": ["KI-131"]}]}
    merged = op_coverage.merge_all([{"B": a}, {"B": b}])["B"]
    assert merged["counts"]["failed"] == 1 and merged["counts"]["passed"] == 1 and not merged["done"]
    assert merged["exercised"] == 2 and merged["cells"] == 3
    text = "\n".join(op_coverage.markdown({"B": merged}))
    assert "| aten | float64 | 1 |" in text and "differential:mismatch:x" in text and "probe: no float32" in text
    assert "- KI-131: `add|out|float32`, `sin|torch|float32`" in text
    rows = op_coverage.heat_rows(merged)
    assert [r["op"] for r in rows] == ["add", "relu", "sin"] and rows[2]["cells"][-1]["l"] in ("F", "")
