"""The claim a campaign's speed rests on, checked over drawn programs: when
the pass grouped nothing, the compile without deduplication and a second
capture tell nothing the main compile did not (``harness.pipeline.spared``),
and a second capture on the "eager" backend sees what one on the run's
backend sees. Each program is run with every companion compiled
(``RunConfig.spare=False``) and the spared ones are compared with the main run."""

from __future__ import annotations

import collections.abc
import functools
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from harness.pipeline import COMPANIONS, run_program, spared
from oracles import dedup_toggle, determinism, guards
from oracles.differential import compare_runs
from oracles.registry import run_config
from campaigns.bench import draw_programs
from suites.tiers import examples

class _Drawn(collections.abc.Sequence):
    """``draw_programs(n, seed)``, drawn when a test first reads it: not at collection, which every xdist
    worker pays (eager runs of each program, about 1.5 s)."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed = n, seed

    @functools.cached_property
    def _programs(self) -> list:
        return draw_programs(self.n, seed=self.seed)

    def __getitem__(self, i):
        return self._programs[i]

    def __len__(self) -> int:
        return len(self._programs)


SAMPLE = _Drawn(14, seed=3)
# the module's runs of SAMPLE (_full, _main) are cached: its tests go to one xdist worker
pytestmark = pytest.mark.shares("spared")


class _More:
    """SAMPLE, then the draw's next programs, drawn only if a test reaches them."""

    def __iter__(self):
        yield from SAMPLE
        yield from draw_programs(40, seed=3)[len(SAMPLE):]


MORE = _More()


FULL = replace(run_config("aot_eager"), spare=False)


@functools.lru_cache(maxsize=None)
def _full(program):
    """The program with every companion compiled: the first two tests read the same runs."""
    return run_program(program, FULL)


def _same_values(a, b) -> list[str]:
    """Every difference between two runs' outputs, state and gradients, to the bit."""
    return [str(v) for v in compare_runs("spared", a, b, None, exact=("output", "state", "grad")) if v.failed]


def _stable(guards_: list[str]) -> list[str]:
    extra, missing = dedup_toggle.guard_difference(guards_, [])
    return extra


# Nightly: it draws until two programs grouping nothing and one grouping something have run, and since
# issue 44's inputs moved the draws that took 30 s of the gate's six minutes; the spared companions
# stay judged in the gate by the tests below (named in verdicts, the sample, eager's second capture).
@pytest.mark.nightly
@pytest.mark.long(seconds=20)
def test_a_run_grouping_nothing_is_its_own_run_without_the_pass():
    config = FULL
    grouped_nothing = grouped = 0
    # SAMPLE, then more until both kinds are there: which programs a seed draws moves with the constants in
    # this project's code (Hypothesis draws integers among the local modules' literals too)
    for program in MORE:
        if grouped_nothing >= 2 and grouped >= 1:
            break
        outcome = _full(program)
        reason = spared(replace(config, spare=True), outcome.compiled, outcome.capture)
        if not reason:
            grouped += outcome.compiled.failure is None
            continue
        grouped_nothing += 1
        (off, off_capture), (_, again) = outcome.companions["dedup_off"], outcome.companions["recapture"]
        assert off.failure is None and not _same_values(outcome.compiled, off), program.to_json()
        assert off_capture.graphs == outcome.capture.graphs
        assert dedup_toggle.guard_difference(outcome.capture.guards, off_capture.guards) == ([], [])
        for on_run, off_run in zip(outcome.capture.variants, off_capture.variants):
            assert (on_run.variant, on_run.recompiled, on_run.invalid) == (off_run.variant, off_run.recompiled, off_run.invalid)
            assert dedup_toggle.guard_difference(on_run.new_guards, off_run.new_guards) == ([], [])
            if on_run.compiled is not None:
                assert not _same_values(on_run.compiled, off_run.compiled)
        assert again.graphs == outcome.capture.graphs and not again.region_groups
        # and the oracles that read the spared companions pass either way
        for check in (dedup_toggle.check, determinism.check, guards.check, guards.check_recompiles):
            assert check(outcome).status.value in ("pass", "inconclusive"), check(outcome)
    assert grouped_nothing >= 2 and grouped >= 1, (grouped_nothing, grouped)  # the sample has both kinds


@pytest.mark.long(seconds=12)
def test_a_needless_change_without_dedup_repeats_what_it_did_with_it():
    """``harness.recall.needless``: a change that reached no guard, or whose
    recompile grouped nothing, does the same without deduplication."""
    from harness.recall import needless

    checked = 0
    # the smallest programs first, until five changes are checked: a few seconds where SAMPLE[:10] took 48
    for program in sorted(SAMPLE, key=lambda p: len(p.to_json())):
        if checked >= 5:
            break
        outcome = _full(program)
        off_run0, off = outcome.companions["dedup_off"]
        if outcome.compiled.failure is not None or _same_values(outcome.compiled, off_run0):
            continue  # the oracle compares the changed calls only where the first calls agree to the bit
        same = sorted(outcome.capture.guards) == sorted(off.guards)
        for on_run, off_run in zip(outcome.capture.variants, off.variants):
            if not needless(on_run, same):
                continue
            checked += 1
            assert off_run.compiled is not None and off_run.compiled.failure is None
            assert (on_run.recompiled, on_run.served_by_original) == (off_run.recompiled, off_run.served_by_original)
            assert dedup_toggle.guard_difference(on_run.new_guards, off_run.new_guards) == ([], [])
            assert not _same_values(on_run.compiled, off_run.compiled)
    assert checked >= 5


@pytest.mark.nightly  # 20 s; the gate keeps test_a_needless_change_without_dedup_repeats_what_it_did_with_it
@pytest.mark.usefixtures("every_off_call")
def test_skipping_needless_changes_leaves_the_guard_verdicts_as_they_were():
    for program in SAMPLE[:6]:
        full = run_program(program, replace(run_config("aot_eager"), spare=False))
        spare = run_program(program, run_config("aot_eager"))
        for check in (guards.check, guards.check_recompiles):
            a, b = check(full), check(spare)
            assert (a.status, a.kind, a.where) == (b.status, b.kind, b.where), (program.to_json(), a, b)


def test_a_second_capture_on_eager_sees_what_one_on_the_backend_sees():
    config = replace(run_config("aot_eager"), spare=False)
    compared = 0
    # SAMPLE, then more until four compare (how many is the draw's); two in the gate since issue 42's cut
    wanted = examples(2, 4)
    for program in draw_programs(28, seed=3):
        if compared >= wanted:
            break
        main = run_program(program, replace(config, companions=(), variants=0)).capture
        eager_recapture = COMPANIONS["recapture"](config, program, main)
        if eager_recapture.backend != "eager":
            continue  # several frames or symbolic shapes: recaptured on the backend itself
        backend_recapture = replace(eager_recapture, backend=config.backend)
        a = run_program(program, replace(eager_recapture, companions=()))
        b = run_program(program, replace(backend_recapture, companions=()))
        if a.compiled.failure is not None or b.compiled.failure is not None:
            continue
        compared += 1
        assert a.capture.graphs == b.capture.graphs
        assert a.capture.region_groups == b.capture.region_groups
        assert dedup_toggle.guard_difference(a.capture.guards, b.capture.guards) == ([], [])
    assert compared >= wanted


def test_a_spared_companion_is_named_in_the_verdicts():
    program = next(p for p in MORE if spared(run_config("aot_eager"), *_main(p), p))
    outcome = run_program(program, run_config("aot_eager"))
    # and a decorated block's twins, where the original computed eager's bits (harness.pipeline.twin_spared)
    assert {"dedup_off", "recapture"} <= set(outcome.spared), outcome.spared
    assert all(k.startswith("region:") for k in set(outcome.spared) - {"dedup_off", "recapture"}), outcome.spared
    assert "recapture" not in outcome.companions
    assert outcome.companions["dedup_off"] == (outcome.compiled, outcome.capture)
    for check in (dedup_toggle.check, determinism.check):
        verdict = check(outcome)
        assert verdict.status.value == "pass" and "grouped nothing" in verdict.message


def test_a_run_that_groups_or_fails_spares_nothing():
    for program in SAMPLE:
        compiled, capture = _main(program)
        if capture.invoke_subgraph_calls or compiled.failure is not None:
            assert spared(run_config("aot_eager"), compiled, capture) == ""
            return
    pytest.fail("no program of the sample grouped anything")


@functools.lru_cache(maxsize=None)
def _main(program):
    """The program's main compile alone (what ``spared`` reads), once per program."""
    outcome = run_program(program, replace(run_config("aot_eager"), companions=(), variants=0))
    return outcome.compiled, outcome.capture


def test_without_dedup_reuses_the_dedup_off_compile():
    from harness.pipeline import without_dedup

    program = next(p for p in SAMPLE if not spared(run_config("aot_eager"), *_main(p), p) and _main(p)[0].failure is None)
    outcome = run_program(program, run_config("aot_eager"))
    again = without_dedup(outcome, replace(outcome.config, variants=0))
    assert not again.config.dedup
    assert again.compiled is outcome.companions["dedup_off"][0]
    assert torch.equal(again.eager.outputs[0], outcome.eager.outputs[0])
    # judged on its own, the run without the pass needs every changed call it skipped
    if any(r.skipped for r in outcome.companions["dedup_off"][1].variants):
        fresh = without_dedup(outcome, outcome.config)
        assert fresh.compiled is not outcome.companions["dedup_off"][0]
        assert not any(r.skipped for r in fresh.capture.variants)


# Nightly since issue 42's cut to six minutes (3 and 5 s): a campaign's regression of the run without deduplication; the gate
# keeps test_a_needless_change_without_dedup_repeats_what_it_did_with_it on the same path
@pytest.mark.nightly
@pytest.mark.usefixtures("every_off_call")
def test_a_change_served_by_an_earlier_changes_entry_keeps_that_recompile_without_dedup():
    """Found by a campaign: CONFIG replaced by a new object recompiles; CONFIG
    replaced again, by another of its kind, is served by that entry. Without
    deduplication the first recompile was skipped as needless, so the second
    call recompiled there only: a false "recompiles with deduplication off
    only". Every recompile is kept where an entry of a change served a later one."""
    from generators.ir import Program

    program = Program.from_json((Path(__file__).parent / "data" / "served_by_a_changed_calls_entry.json").read_text())
    spare = run_program(program, run_config("aot_eager"))
    served_later = [r for r in spare.capture.variants if not r.recompiled and not r.served_by_original]
    assert served_later, "the program no longer shows an entry of one change serving another"
    off = spare.companions["dedup_off"][1]
    assert all(not r.skipped for r, on in zip(off.variants, spare.capture.variants) if on.recompiled)
    full = run_program(program, replace(run_config("aot_eager"), spare=False))
    for check in (guards.check, guards.check_recompiles):
        a, b = check(full), check(spare)
        assert (a.status, a.kind, a.where) == (b.status, b.kind, b.where) and not b.failed, (a, b)


@pytest.fixture
def every_off_call(monkeypatch):
    """The changed calls without deduplication made for every program, not a
    sample (harness.recall.OFF_CALLS_EVERY): what the needless rule keeps."""
    from harness import recall

    monkeypatch.setattr(recall, "OFF_CALLS_EVERY", 1)


# Nightly since issue 42's cut to six minutes (12 s: the sample's programs run until one outside it groups something): the gate
# keeps the companions' other claims below and the recall's sampling unit (harness.recall.sampled_out) in them
@pytest.mark.nightly
def test_outside_the_sample_no_changed_call_is_made_without_dedup_unless_the_first_call_failed():
    from harness.recall import OFF_CALLS_EVERY, sampled_out
    from harness.sample import in_sample

    ran = [p for p in SAMPLE if _main(p)[0].failure is None]
    program = next(p for p in ran if not in_sample(p, OFF_CALLS_EVERY, "off_calls")
                   and not spared(run_config("aot_eager"), *_main(p), p))
    outcome = run_program(program, run_config("aot_eager"))
    off = outcome.companions["dedup_off"][1].variants
    assert off and all(r.skipped.startswith("compared with the calls with deduplication in one program in")
                       for r in off), [r.skipped for r in off]
    assert guards.check(outcome).status.value != "fail" and guards.check_recompiles(outcome).status.value != "fail"
    # in the sample, or where the first call with deduplication failed (None), they are made
    inside = next(replace(program, seed=s) for s in range(100) if in_sample(replace(program, seed=s), OFF_CALLS_EVERY, "off_calls"))
    assert sampled_out(inside, outcome.capture) == ""
    assert sampled_out(program, None) == ""


# Nightly since issue 42's cut to six minutes (3 and 5 s): a campaign's regression of the run without deduplication; the gate
# keeps test_a_needless_change_without_dedup_repeats_what_it_did_with_it on the same path
@pytest.mark.nightly
@pytest.mark.usefixtures("every_off_call")
def test_a_recompile_a_later_change_builds_on_is_kept_without_dedup():
    """Found by a campaign (seed 19): the argument p0 changed 2 -> 0.5
    recompiles, and automatic dynamic guards p0 by its type in every later
    recompile. Without deduplication that recompile was skipped as needless,
    so the later default-dtype change recompiled there with p0 == 2: a false
    "the new entry's guards differ with deduplication". A change that
    recompiled is called without deduplication wherever a later one is."""
    from generators.ir import Program

    from unittest import mock

    from generators.variants import variants
    from harness import recall

    program = Program.from_json((Path(__file__).parent / "data" / "recompile_history_of_a_later_change.json").read_text())
    kinds = ("buffer:replace", "free:argument:type", "state:default_dtype")  # the campaign's three changes
    chosen = [next(v for v in variants(program) if v.kind == k) for k in kinds]
    with mock.patch.object(recall, "select", lambda p, limit: chosen):
        outcome = run_program(program, run_config("aot_eager"))
    on, off = outcome.capture.variants, outcome.companions["dedup_off"][1].variants
    assert [r.variant["kind"] for r in on] == ["buffer:replace", "free:argument:type", "state:default_dtype"]
    assert on[1].recompiled and on[2].recompiled, "the program no longer recompiles for both changes"
    assert not off[1].skipped and not off[2].skipped
    verdict = guards.check(outcome)
    assert not verdict.failed, verdict


def test_triage_re_runs_compile_a_companion_only_for_the_failure_that_reads_it():
    """A re-run shared by the triage of several failures (reports.triage.shared_reruns) is compiled once; the
    compile without deduplication is added when the first failure judged by an oracle reading it asks, and the
    dedup on/off oracle's second capture only for its guard comparison."""
    from oracles.registry import ORACLES
    from reports import triage

    toggle = ORACLES[dedup_toggle.NAME]
    assert "recapture" in toggle.needs_for("guards") and toggle.needs_for("mismatch") == ("dedup_off",)
    assert ORACLES[determinism.NAME].needs_for("mismatch") == ("recapture",)
    program = SAMPLE[0]
    plain = replace(run_config("aot_eager"), companions=())
    with triage.shared_reruns([ORACLES["differential"], toggle]):
        first = triage._rerun(program, plain)
        assert first.companions == {}
        again = triage._rerun(program, replace(plain, companions=toggle.needs_for("mismatch")))
        assert again is first and "dedup_off" in first.companions and "recapture" not in first.companions
        assert dedup_toggle.check(first).status.value == "pass"


def test_same_bits_is_exact():
    """What sparing a twin rests on (harness.bits): a signed zero, a NaN's place, a dtype or a requires_grad apart
    is a difference; NaN where both have it is not."""
    from harness.bits import same_bits
    from harness.outcome import Execution

    def run(*values, requires_grad=False):
        return Execution(outputs=[torch.tensor(v) for v in values], requires_grad=[requires_grad] * len(values),
                         treespec="T")

    nan = float("nan")
    assert same_bits(run([1.0, nan, 0.0]), run([1.0, nan, 0.0]))
    assert not same_bits(run([1.0, nan, 0.0]), run([1.0, nan, -0.0]))
    assert not same_bits(run([1.0, nan]), run([nan, 1.0]))
    assert not same_bits(run([1.0]), run([1.0 + 2 ** -20]))
    assert not same_bits(run([1.0]), Execution(outputs=[torch.tensor([1.0], dtype=torch.float64)],
                                               requires_grad=[False], treespec="T"))
    assert not same_bits(run([1.0]), run([1.0], requires_grad=True))
    assert same_bits(run([3]), run([3])) and not same_bits(run([3]), run([4]))


def test_a_twin_is_compiled_only_where_the_original_leaves_it_something_to_decide():
    """``harness.pipeline.twin_spared``: next to an original that computed eager's bits the twins are not
    compiled and the oracle passes; compiled, they pass too; the audit sample compiles them."""
    from harness.pipeline import AUDIT_EVERY
    from harness.sample import in_sample
    from oracles import compile_region
    from suites.test_compile_region_oracle import HIERARCHY

    program = next(replace(HIERARCHY, seed=s) for s in range(100) if not in_sample(replace(HIERARCHY, seed=s), AUDIT_EVERY, "audit"))
    config = run_config("aot_eager", (compile_region.NAME,), dedup=False)
    spare = run_program(program, config)
    assert spare.spared and all(k.startswith("region:") for k in spare.spared), spare.spared
    assert not any(k.startswith("region:") for k in spare.companions)
    assert compile_region.check(spare).status.value == "pass"
    full = run_program(program, replace(config, spare=False))
    assert any(k.startswith("region:") for k in full.companions)
    assert compile_region.check(full).status.value == "pass"
    audited = run_program(next(replace(HIERARCHY, seed=s) for s in range(100)
                               if in_sample(replace(HIERARCHY, seed=s), AUDIT_EVERY, "audit")), config)
    assert not audited.spared and any(k.startswith("region:") for k in audited.companions)


def test_samples_are_by_the_whole_program_and_near_their_rate():
    """harness.sample: programs that differ only in structure fall apart; over many seeds (Hypothesis draws 0 and
    powers of two most) the share is near one in ``every``, and each sampler draws its own."""
    from harness.sample import in_sample
    from suites.test_compile_region_oracle import HIERARCHY

    drawn = [replace(HIERARCHY, seed=s) for s in range(400)]
    share = sum(in_sample(p, 4, "a") for p in drawn) / len(drawn)
    assert 0.18 < share < 0.32, share
    assert [in_sample(p, 4, "a") for p in drawn] != [in_sample(p, 4, "b") for p in drawn]
    assert all(in_sample(p, 1, "a") for p in drawn[:5])


def test_a_processs_first_program_is_audited():
    """A pass that misbehaves on every program without grouping anything (a guard of its own) is met on each
    worker's first program (``Outcome.first_capture``), not only in the audit sample."""
    program = next(p for p in MORE if spared(run_config("aot_eager"), *_main(p), p))
    assert spared(run_config("aot_eager"), *_main(program), program, first_capture=True) == ""


def test_a_guard_only_the_first_trace_in_a_process_installs_is_no_dedup_difference():
    """The first trace of a program with nested_compile_region installs ID_MATCH on the torch module (pytree's
    flatten inside invoke_subgraph), later traces do not, deduplication on or off: compared with the dedup-off
    compile that follows it, the first compile "had an extra guard" (make fuzz, seed 2, a helper's triage)."""
    from oracles import dedup_toggle

    first = ["ID_MATCH __import__('torch')", "TENSOR_MATCH L['x']", "ID_MATCH ___N"]
    later = ["TENSOR_MATCH L['x']"]
    assert dedup_toggle.guard_difference(first, later) == (["ID_MATCH ___N"], [])
    assert dedup_toggle.guard_difference(later, first) == ([], ["ID_MATCH ___N"])
