"""Campaigns that steer themselves (``--feedback``): the mutation operators
and swarm draws make valid programs, the tracer sees torch's branches (and
only new ones), the corpus keeps what reached something new and refuses what
another torch or backend wrote, and a steered campaign records, resumes and
merges its corpus, with findings from mutants replayed and minimized like any
other."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from campaigns.corpus import Corpus
from campaigns.merge import merge
from campaigns.steer import DRAW, MUTATE, SWARM, Steering
from generators.check import check
from generators.ir import Program, from_dict, to_dict
from generators.mutate import OPERATORS, mutate
from generators.ops import OPS
from generators.strategies import HAS_NESTED_COMPILE_REGION, programs
from generators.swarm import Swarm, draw_swarm, flags
from harness import branches
from harness.outcome import RunConfig
from harness.pipeline import run_program
from harness.run_edges import bucket, outcome_edges, source_shape
from reports import feedback
from harness import warm

pytestmark = pytest.mark.unit

SLOW = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


# -- mutation operators and swarm draws ---------------------------------------------


@SLOW
@given(programs(), programs(), st.sampled_from(sorted(OPERATORS)), st.integers(0, 2**16))
def test_every_mutant_is_a_valid_program_unlike_its_parent(parent, other, operator, seed):
    mutant = mutate(parent, operator, random.Random(seed), other)
    if mutant is None:
        return
    check(mutant)  # valid by construction
    assert mutant.to_json() != replace(parent, options=replace(parent.options, door="")).to_json()
    assert from_dict(json.loads(json.dumps(to_dict(mutant)))) == mutant  # a plain value: a finding's program.json
    assert mutant.options.door == ""  # a door is the campaign's to give


def test_every_operator_applies_to_drawn_programs():
    """No operator is dead code: each changes some of 40 drawn programs."""
    drawn: list[Program] = []

    @settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(programs(edges=True))
    def keep(program):
        drawn.append(program)

    keep()
    rng = random.Random(0)
    applied = Counter(op for op in OPERATORS for p in drawn if mutate(p, op, rng, rng.choice(drawn)) is not None)
    assert set(applied) == set(OPERATORS), {op: applied[op] for op in OPERATORS}


@SLOW
@given(st.integers(0, 2**32))
def test_swarm_draws_leave_out_what_their_configuration_switches_off(seed):
    config = draw_swarm(random.Random(seed))
    assert Swarm.from_dict(config.to_dict()) == config
    assert set(config.off) <= set(flags())

    @settings(max_examples=5, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(programs(swarm=config))
    def drawn(program):
        check(program)
        ops = {s.op for b in program.blocks() for s in b.body}
        kept = [c for c in {OPS[o].category for o in OPS} if config.allows(f"op:{c}")]
        if len(kept) >= 2:  # strategies fall back to every category when fewer would be left
            # the repairs the generator itself adds (a clone after a view, a neg for an empty body) are exempt
            assert not {o for o in ops if o in OPS and not config.allows(f"op:{OPS[o].category}")} - {
                "clone", "neg"}, (config.off, ops)
        if not config.allows("part:contexts"):
            assert all(c.context == type(c.context)() for _, c in program.repeats())
        if config.boosts("compile_region"):
            assert program.block.compile_region or not HAS_NESTED_COMPILE_REGION

    drawn()


# -- the signal ------------------------------------------------------------------------


def test_a_watched_pattern_that_names_nothing_is_an_error():
    with pytest.raises(branches.WatchError, match="matches nothing"):
        branches.watched_files(("torch/_dynamo/no_such_file_*.py",))
    assert any(f.endswith("graph_deduplication.py") for f in branches.watched_files())


REPEATED = from_dict({
    "inputs": [["x", {"shape": [3, 4], "dtype": "float32", "requires_grad": True, "layout": "contiguous"}]],
    "block": {"kind": "function", "inputs": ["x"], "weights": [], "buffers": [], "args": ["s0"],
              "body": [{"out": "v0", "op": "mul_scalar", "operands": [{"ref": "x"}, {"arg": "s0"}]},
                       {"out": "v1", "op": "sin", "operands": [{"ref": "v0"}]}],
              "result": "v1", "compile_region": False, "attrs": False},
    "sections": [{"structure": "calls", "flow": "chain", "calls": [{"args": [2.0]}, {"args": [2.0]}, {"args": [2.0]}],
                  "outer": 1, "interleave": None, "keywords": False}],
    "interludes": [], "outputs": "single", "options": {"fullgraph": False, "dynamic": None, "mark_dynamic": []},
    "seed": 0, "frees": []})


def test_the_tracer_sees_the_pass_run_and_reports_each_edge_once():
    tracer = branches.Tracer(branches.watched_files())
    branches.install(tracer)
    try:
        outcome = run_program(REPEATED, RunConfig(variants=3))
        first = tracer.take()
        assert outcome.capture.deduplicated
        assert any(e.startswith("torch/_dynamo/graph_deduplication.py:") for e in first), sorted(first)[:5]
        assert any(e.startswith("torch/_dynamo/guards.py:") for e in first)
        run_program(REPEATED, RunConfig(variants=3))
        assert len(tracer.take()) < len(first) // 10  # the same program again: (almost) nothing new
        assert tracer.take() == set()
    finally:
        branches.install(None)
    edges = outcome_edges(outcome)
    assert "region_groups:1" in edges and "invoke_subgraph:3-4" in edges or "invoke_subgraph:2" in edges, edges
    assert any(e.startswith("guard:TENSOR_MATCH") for e in edges)
    assert any(e.startswith("variant:") for e in edges)


def test_untraced_runs_record_nothing():
    branches.install(None)
    run_program(REPEATED, RunConfig())
    assert branches.take() == set()


def test_edge_names_keep_kind_and_drop_identity():
    assert source_shape("L['self']._modules['blocks']._modules['0'].weight") == "L[].[].[]."
    assert source_shape("G['CONFIG'].p0") == "G[]."
    assert [bucket(n) for n in (0, 1, 2, 3, 4, 5, 8, 9)] == ["0", "1", "2", "3-4", "3-4", "5-8", "5-8", "9-16"]
    assert feedback.edge_file("torch/_dynamo/guards.py:12>14") == "torch/_dynamo/guards.py"
    assert feedback.edge_file("guard:TENSOR_MATCH:L[]") == "guard"


# -- the corpus and the bandit -----------------------------------------------------------


def test_the_corpus_keeps_its_entries_and_skips_other_torches_backends_and_corrupt_files(tmp_path):
    folder = tmp_path / "corpus"
    mine = Corpus(folder, torch.__version__, "aot_eager")
    mine.add("0-m0.0", REPEATED, {"source": "mutate"}, ["b", "a"])
    Corpus(folder, "1.0.0", "aot_eager").add("old", REPEATED, {}, ["c"])
    Corpus(folder, torch.__version__, "inductor").add("other", REPEATED, {}, ["d"])
    (folder / "torn.json").write_text('{"id": "torn", "edg')
    (folder / "bad.json").write_text(json.dumps({"id": "bad", "torch": torch.__version__, "backend": "aot_eager",
                                                 "edges": [], "program": {"inputs": []}}))
    again = Corpus(None, torch.__version__, "aot_eager")
    loaded = again.load(folder)
    assert [e.id for e in loaded] == ["0-m0.0"] and loaded[0].program == REPEATED and loaded[0].edges == ["a", "b"]
    reasons = {p.rsplit("/", 1)[-1]: why for p, why in again.skipped.items()}
    assert reasons["old.json"].startswith("written by torch 1.0.0")
    assert reasons["other.json"].startswith("written by backend inductor")
    assert reasons["torn.json"].startswith("corrupt") and reasons["bad.json"].startswith("corrupt")
    assert again.load(folder) == []  # read once


def _steering(tmp_path, steer: bool = True) -> Steering:
    def plain():
        for k in range(1000):
            yield f"0-0-{k}", replace(REPEATED, seed=k)

    def swarm():
        for k in range(1000):
            yield f"0-w0-{k}", replace(REPEATED, seed=10_000 + k), Swarm().to_dict()

    return Steering(0, (0, 1), Corpus(tmp_path / "corpus", torch.__version__, "aot_eager"), plain(), swarm(),
                    steer=steer)


def test_the_bandit_keeps_what_reached_something_new_and_mutates_it(tmp_path):
    s = _steering(tmp_path)
    pid, program, origin = s.next()
    assert origin["source"] in (DRAW, SWARM)  # nothing to mutate yet
    assert s.observe(pid, program, origin, ["e1", "e2"], 1.0) == ["e1", "e2"]
    assert s.observe("again", program, origin, ["e1"], 1.0) == []  # nothing new: not kept
    assert list(s.corpus.entries) == [pid] and (tmp_path / "corpus" / f"{pid}.json").exists()
    sources = Counter(s.next()[2]["source"] for _ in range(200))
    assert sources[MUTATE] > 0 and sources[DRAW] + sources[SWARM] > 0, sources
    # an arm whose programs keep paying is drawn more
    for _ in range(30):
        s.observe("x", program, {"arm": f"{MUTATE}:duplicate_call"}, [f"n{random.random()}"], 0.5)
    assert s.arms[f"{MUTATE}:duplicate_call"].rate > s.arms[DRAW].rate
    # mutant ids go on after a resumed campaign's
    s.resume_from({"0-m0.4", "0-m0.17", "0-0-3"})
    assert s.mutants == 18


def test_edges_mode_draws_plainly_and_counts(tmp_path):
    s = _steering(tmp_path, steer=False)
    for _ in range(5):
        pid, program, origin = s.next()
        assert origin["source"] == DRAW
        s.observe(pid, program, origin, [pid], 1.0)
    assert len(s.corpus.entries) == 5


# -- a steered campaign end to end --------------------------------------------------------


# Nightly since issue 42's cut to six minutes (40 s: a campaign's start, its minimize and verify tasks, and a resumed one): the
# gate keeps the mutants, the operators, the swarm, the tracer, the corpus and the bandit above, and a whole
# campaign through its command line (test_campaign)
@pytest.mark.nightly
def test_a_steered_campaign_records_mutants_findings_resumes_and_merges(tmp_path, monkeypatch, request):
    """Every program after the seed corpus is a mutant (the bandit forced to
    mutate): a finding of a mutant is minimized and its repro run like any
    other, with its IR in program.json and its origin in the log; the corpus
    survives ``--resume`` and ``report merge``; a corrupt and a foreign entry
    of a shared corpus are skipped by name; ``--coverage`` measures alongside."""
    from campaigns import campaign, steer
    from campaigns.campaign import Options

    backend = "suites.planted:perturb_one_element"
    shared = tmp_path / "shared"
    # without gradients: the planted backend runs a subgraph's backward outside AOTAutograd (KI-002)
    seed = replace(REPEATED, inputs=(("x", replace(REPEATED.inputs[0][1], requires_grad=False)),))
    Corpus(shared, torch.__version__, backend).add("seed-0", seed, {"source": "draw"}, ["seeded"])
    Corpus(shared, "0.1", backend).add("foreign", REPEATED, {}, ["x"])
    (shared / "torn.json").write_text("{")
    monkeypatch.setattr(steer.Steering, "_arm", lambda self: f"{MUTATE}:duplicate_call" if self.corpus.entries
                        else DRAW)
    out = tmp_path / "run"
    options = Options(backend=backend, budget=150, workers=1, out=out, oracles=("differential",), programs=3,
                      feedback="steer", corpus=(shared,), minimize_seconds=10, door_share=0, lint_share=0, sweep="off",
                      coverage=True)
    first = campaign.run(options)
    # --coverage and --feedback share one tracer: both see the pass run
    assert first["coverage"]["torch/_dynamo/graph_deduplication.py"]["lines"] > 20, first["coverage"]
    assert first["feedback"]["files"].get("torch/_dynamo/graph_deduplication.py", 0) > 20, first["feedback"]["files"]
    events = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    ran = [e for e in events if e["event"] == "program"]
    assert ran and all(e["origin"]["source"] == MUTATE for e in ran), [e.get("origin") for e in ran]
    skipped = {e["path"].rsplit("/", 1)[-1]: e["reason"] for e in events if e["event"] == "corpus_skipped"}
    assert set(skipped) == {"foreign.json", "torn.json"}, skipped
    hits = [e for e in events if e["event"] == "finding" and e.get("origin", {}).get("source") == MUTATE
            and not e["known_issue"] and not e.get("unmasked")]  # a known issue is not minimized
    assert hits, [(e["event"], e.get("signature")) for e in events]
    entry = next(f for f in first["findings"] if f["signature"] == hits[0]["signature"])
    assert entry["minimized"] and entry["repro_exit"] == 1, entry
    replayed = from_dict(json.loads((out / entry["folder"] / "program.json").read_text()))
    check(replayed)
    repro = warm.run([str(out / entry["folder"] / "repro.py")], timeout=120, cwd=request.config.rootpath)
    assert repro.returncode == 1, repro.stdout[-2000:]
    kept = {p.name for p in (out / "corpus").glob("*.json")}
    assert kept and first["feedback"]["corpus"] >= len(kept)
    assert first["feedback"]["sources"][f"{MUTATE}:duplicate_call"]["programs"] == len(ran)

    # resumed: the corpus is read back (nothing skipped), mutant ids go on
    resumed = campaign.run(replace(options, resume=True, programs=1, corpus=(), minimize_seconds=0, coverage=False))
    events = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    ids = [e["id"] for e in events if e["event"] == "program"]
    assert len(ids) == len(set(ids)) > len(ran)
    assert resumed["feedback"]["corpus"] >= len(kept)
    assert kept <= {p.name for p in (out / "corpus").glob("*.json")}

    # merged with another shard's folder: the corpora are unioned
    other = tmp_path / "other"
    shutil.copytree(out, other)
    for folder, shard in ((out, "0/2"), (other, "1/2")):  # a copy of one shard, labelled as a second one
        log = folder / "findings.jsonl"
        log.write_text(log.read_text().replace('"shard": "0/1"', f'"shard": "{shard}"'))
    Corpus(other / "corpus", torch.__version__, backend).add("0-m9.0", REPEATED, {"source": "mutate"}, ["shard 9"])
    merged = merge([out, other], tmp_path / "merged")
    assert {p.name for p in (tmp_path / "merged" / "corpus").glob("*.json")} == kept | {"0-m9.0.json"} | {
        p.name for p in (out / "corpus").glob("*.json")}
    assert merged["feedback"]["corpus"] == len(list((tmp_path / "merged" / "corpus").glob("*.json")))


@pytest.mark.parametrize("args, message", [
    (["--feedback", "steer", "--watch", "torch/no_such_*.py"], "error: watched-file pattern 'torch/no_such_*.py' "
                                                               "matches nothing"),
    (["--feedback", "steer", "--corpus", "/no/such/folder"], "error: --corpus: no such folder: /no/such/folder"),
    (["--watch", "torch/_dynamo/guards.py"], "error: --watch and --corpus need --feedback"),
])
def test_bad_feedback_input_is_one_line(tmp_path, request, args, message):
    done = warm.run(["-m", "harness", "fuzz", "--budget", "1", "--out", str(tmp_path / "x"),
                     *args], timeout=120, cwd=request.config.rootpath)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message) and len(done.stderr.strip().splitlines()) == 1, done.stderr
