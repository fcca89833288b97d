"""Planted faults only the edge parts of the generator can catch (in-call
rebinds, writes between repeats, aliased inputs, fields of user objects),
each caught by the oracle that judges that part, while the honest pipeline
passes the very same program."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest

from generators.ir import Block, Call, Free, FreeVar, Options, Program, Ref, Section, Stmt, TensorSpec
from generators.variants import Variant
from harness import recall
from harness.outcome import RunConfig
from harness.pipeline import run_program
from oracles import differential, guards
from oracles.verdict import Status

from . import planted_edges
from harness import warm

pytestmark = pytest.mark.unit

X = ("x", TensorSpec((3, 4)))
Y = ("y0", TensorSpec((3, 4)))


def _program(body, result, inputs=(X,), calls=(Call(), Call()), frees=(), write=None) -> Program:
    block = Block("function", tuple(n for n, _ in inputs), (), (), (), tuple(Stmt(*s) for s in body), result)
    return Program(inputs=inputs, block=block, sections=(Section("calls", "chain", calls, write=write),),
                   options=Options(fullgraph=True), frees=frees)


# CONFIG.p0 is rebound in the forward before each repeat: 2.0, then -1.0
REBOUND = _program([("v0", "sin", (Ref("x"),)), ("v1", "mul_scalar", (Ref("v0"), Free("p0")))], "v1",
                   frees=(FreeVar("p0", 2.0, "dataclass"),),
                   calls=(Call(sets=(("p0", 2.0),)), Call(sets=(("p0", -1.0),))))
# y0 is scaled in place after each repeat; the next repeat reads it
WRITTEN = _program([("v0", "add", (Ref("x"), Ref("y0")))], "v0", inputs=(X, Y), write=("y0", "direct"))
# block(x, y0) then block(x, x): the aliased call second (first is KI-028)
ALIASED = Program(inputs=(X, Y),
                  block=Block("function", ("x", "y0"), (), (), (),
                              (Stmt("v0", "add", (Ref("x"), Ref("y0"))), Stmt("v1", "sin", (Ref("v0"),)),
                               Stmt("v2", "mul", (Ref("v1"), Ref("y0")))), "v2"),
                  sections=(Section("for_range", "fanout", (Call(tensor="x"), Call(tensor="x", alias="same"))),),
                  outputs="tuple")
# x * CONFIG.p0, CONFIG a dataclass instance
FIELD = _program([("v0", "sin", (Ref("x"),)), ("v1", "mul_scalar", (Ref("v0"), Free("p0")))], "v1",
                 frees=(FreeVar("p0", 3, "dataclass"),), calls=(Call(),))

FIELD_CHANGED = Variant("object:dataclass", "CONFIG.p0", "CONFIG.p0: 3 -> 2",
                        ("_saved = CONFIG.p0", "CONFIG.p0 = 2"), ("CONFIG.p0 = _saved",))


def _differential(program: Program, backend: str = "aot_eager"):
    return differential.check(run_program(program, RunConfig(backend=backend, dedup=False)))


def _guards(program: Program, variant: Variant):
    with mock.patch.object(recall, "select", lambda p, limit: [variant]):
        return guards.check(run_program(program, RunConfig(backend="aot_eager", dedup=False, variants=1)))


def test_a_frame_that_forgets_its_own_stores_is_caught_by_in_call_rebinds():
    assert _differential(REBOUND).status is Status.PASS
    with planted_edges.pending_stores_ignored():
        verdict = _differential(REBOUND)
    assert verdict.failed, verdict  # wrong values, or Dynamo trips over its own lost store


# a global or a dataclass field the forward rebinds before each repeat: state the call leaves behind
STORED = {home: replace(REBOUND, frees=(FreeVar("p0", 2.0, home),)) for home in ("global", "dataclass")}


def test_the_python_state_a_call_leaves_behind_is_compared_and_a_dropped_store_is_caught():
    """Every value read inside the frame stays right when Dynamo leaves out its writes to Python state outside
    it; only the state after the call tells (harness.execute reads what generators.codegen's python_state names)."""
    from reports.triage import known_issue, triage

    for home, program in STORED.items():
        assert _differential(program).status is Status.PASS, home
        with planted_edges.stores_dropped():
            outcome = run_program(program, RunConfig(backend="aot_eager", dedup=False))
        verdict = differential.check(outcome)
        assert verdict.failed and verdict.where.startswith("state[python:"), (home, verdict)
        with planted_edges.stores_dropped():
            assert known_issue(triage(outcome, verdict)) is None, home


def test_writes_moved_past_later_reads_are_caught_by_writes_between_repeats():
    assert _differential(WRITTEN, "eager").status is Status.PASS
    verdict = _differential(WRITTEN, "suites.planted_edges:writes_deferred")
    assert verdict.failed and verdict.kind == "mismatch", verdict
    # a program without a write between repeats gives the fault nothing to move
    plain = _program([("v0", "add", (Ref("x"), Ref("y0")))], "v0", inputs=(X, Y))
    assert _differential(plain, "suites.planted_edges:writes_deferred").status is Status.PASS


def test_a_subgraph_built_from_another_region_is_caught_by_aliased_calls():
    honest = run_program(ALIASED, RunConfig(backend="aot_eager"))
    assert differential.check(honest).status is Status.PASS
    with planted_edges.last_region_as_reference():
        verdict = differential.check(run_program(ALIASED, RunConfig(backend="aot_eager")))
    assert verdict.failed and verdict.kind == "mismatch", verdict
    # the same calls without the alias: every region alike, nothing to tell apart
    plain = replace(ALIASED, sections=(replace(ALIASED.sections[0], calls=(Call(tensor="x"), Call(tensor="x"))),))
    with planted_edges.last_region_as_reference():
        assert differential.check(run_program(plain, RunConfig(backend="aot_eager"))).status is Status.PASS


def test_unguarded_object_fields_are_caught_by_changing_a_field_in_place():
    assert _guards(FIELD, FIELD_CHANGED).status is Status.PASS
    with planted_edges.object_fields_unguarded():
        verdict = _guards(FIELD, FIELD_CHANGED)
    assert verdict.failed and verdict.kind == "stale", verdict


def _repro_exit(program: Program, backend: str, tmp_path, variant: Variant | None = None, dedup: bool = False) -> int:
    """Exit status of the standalone repro (differential, or guard with
    ``variant``) of ``program`` compiled by ``backend``: a planted backend, or
    a planted Dynamo fault entered in the repro's own process
    (``suites.planted_edges:<fault>__<backend>``)."""
    from .planted_pass import render_planted

    path = tmp_path / "repro.py"
    path.write_text(render_planted(program, backend, "guard" if variant else "differential",
                                   variant.to_dict() if variant else None, dedup=dedup))
    root = Path(__file__).resolve().parents[1]  # the repro imports the planted backend from here
    return warm.run([str(path)], cwd=root, timeout=300).returncode


PLANTED_REPROS = [
    ("suites.planted_edges:writes_deferred", "WRITTEN", None, False),
    ("suites.planted:zero_sign_lost", "EDGE_PROGRAM", None, False),
    ("suites.planted:nan_zeroed", "EDGE_PROGRAM", None, False),
    ("suites.planted_edges:pending_stores_ignored__aot_eager", "REBOUND", None, False),
    ("suites.planted_edges:stores_dropped__aot_eager", "REBOUND", None, False),
    ("suites.planted_edges:last_region_as_reference__aot_eager", "ALIASED", None, True),
    ("suites.planted_edges:object_fields_unguarded__aot_eager", "FIELD", FIELD_CHANGED, False),
]


@pytest.mark.parametrize("backend, program, variant, dedup", PLANTED_REPROS, ids=[r[0].split(":")[1] for r in PLANTED_REPROS])
def test_a_planted_fault_finding_has_a_repro_that_exits_1(backend, program, variant, dedup, tmp_path):
    from . import test_differential_oracle

    program = globals().get(program) or getattr(test_differential_oracle, program)
    assert _repro_exit(program, backend, tmp_path, variant, dedup) == 1
    # the same repro on the honest backend does not reproduce
    assert _repro_exit(program, backend.rpartition("__")[2] if "__" in backend else "eager", tmp_path, variant,
                       dedup) == 0


def test_no_known_issue_claims_an_edge_fault():
    """Each planted edge fault reads as new: last_region_as_reference meets
    aliased calls like KI-028, but with the aliased call later in the group
    (alias:later), which is not KI-028's cause (alias:first)."""
    from reports.triage import known_issue, triage

    def named(outcome, verdict) -> tuple[str, object]:
        assert verdict.failed, verdict
        finding = triage(outcome, verdict)
        return finding.signature, known_issue(finding)

    found = []
    with planted_edges.pending_stores_ignored():
        o = run_program(REBOUND, RunConfig(backend="aot_eager", dedup=False))
        found.append(named(o, differential.check(o)))
    o = run_program(WRITTEN, RunConfig(backend="suites.planted_edges:writes_deferred", dedup=False))
    found.append(named(o, differential.check(o)))
    with planted_edges.last_region_as_reference():
        o = run_program(ALIASED, RunConfig(backend="aot_eager"))
        found.append(named(o, differential.check(o)))
    with planted_edges.object_fields_unguarded(), mock.patch.object(recall, "select", lambda p, limit: [FIELD_CHANGED]):
        o = run_program(FIELD, RunConfig(backend="aot_eager", dedup=False, variants=1))
        found.append(named(o, guards.check(o)))
    assert [k for _, k in found] == [None] * 4, found
    assert found[2][0] == "differential:mismatch:dedup:alias:later"
