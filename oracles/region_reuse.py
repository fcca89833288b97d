"""Reuse of ``nested_compile_region`` bodies: traced once a frame, or refused for a reason Dynamo gives.

``nested_compile_region`` exists so that a function called many times is traced once and its body
reused (its docstring: "compiled once and safely reused", stamped out "on every subsequent invocation";
it "does not promise that a region will be compiled exactly once": new input conditions make Dynamo
trace it again, so a refusal with a reason is no finding). A call whose inputs pass the reuse check stamps
out the body traced for an earlier call (torch/_dynamo/variables/invoke_subgraph.py: ``is_reusable``,
``stamp_out_subgraph``); one that fails it is traced again, and Dynamo says why in its
``hierarchical_compile`` log ("reuse failed -- ...", "not eligible -- ..."). A body traced again that
comes out the same is installed under the same identifier (Dynamo dedups identical subgraphs), so the
outputs never show a reuse lost: the compile only takes longer, once per call, which is what the
decorator is for. Judged on the run without deduplication (the pass's own subgraphs are not regions):
calls in one frame that ran a body already installed in it (its identifier seen before) must each
be a cache hit Dynamo logged, unless it logged a refusal. A lower-severity finding ("missed"), as a
missed merge of the pass is. Not judged where a body is reused by the program's own key
(``reuse_hash_fn``): a key that differs is a miss Dynamo does not log, and the key reads more than a
call's graph shows (grad mode, autocast, the default dtype).
"""

from __future__ import annotations

from harness.observe import SYMBOLIC_OPERAND
from harness.outcome import Capture, Outcome
from generators.regions import marked

from .verdict import Status, Verdict

NAME = "region_reuse"
NEEDS = ("dedup_off",)

# What Dynamo's hierarchical_compile log says, by the start of its message (after "subgraph_reuse: ").
HIT = ("cache hit", "hash key")
REFUSED = ("reuse failed", "not eligible", "mutated sources", "cannot build condition")
PREFIX = "subgraph_reuse: "


def said(log: list[str], starts: tuple[str, ...]) -> list[str]:
    """The reuse decisions Dynamo logged that begin with one of ``starts``, without the prefix."""
    return [m[len(PREFIX):] for m in log if m.startswith(PREFIX) and m[len(PREFIX):].startswith(starts)]


def _said(log: list[str], starts: tuple[str, ...]) -> int:
    return len(said(log, starts))


def _again(calls: list[str]) -> int:
    """Calls of one frame that ran a body installed before them in it. A call handed a symbolic number is
    not counted: is_reusable compares a SymInt argument by identity (``sym_num is not cached_val``), a
    refusal Dynamo does not log, and each call computes its own (``x.numel()`` under dynamic shapes)."""
    seen, again = set(), 0
    for call in calls:
        body, sym = call.removesuffix(SYMBOLIC_OPERAND), call.endswith(SYMBOLIC_OPERAND)
        again += body in seen and not sym
        seen.add(body)
    return again


def _capture(outcome: Outcome) -> Capture | None:
    """The capture without deduplication: the companion, or the main run where the pass was off."""
    if not outcome.config.dedup:
        return outcome.capture if outcome.compiled.failure is None else None
    off = outcome.companions.get("dedup_off")
    return off[1] if off is not None and off[0].failure is None else None


def check(outcome: Outcome) -> Verdict:
    if not marked(outcome.program):
        return Verdict(NAME, Status.PASS, message="no nested_compile_region")
    if any(b.compile_region and b.reuse == "hash" for b in outcome.program.blocks()):
        return Verdict(NAME, Status.PASS, message="a reuse_hash_fn decides reuse: its misses go unlogged")
    capture = _capture(outcome)
    if capture is None:
        return Verdict(NAME, Status.INCONCLUSIVE, message="no run without deduplication got through "
                                                          "(the differential oracle judges the crash)")
    if capture.reuse_log is None:
        return Verdict(NAME, Status.PASS, message="this torch logs no reuse decision (no hierarchical_compile log)")
    again = sum(_again(ids) for ids in capture.bodies)
    hits, refused = _said(capture.reuse_log, HIT), _said(capture.reuse_log, REFUSED)
    if again > hits + refused:
        return Verdict(NAME, Status.FAIL, kind="missed", where="reuse",
                       message=f"{again} nested-region calls ran a body already installed in their frame, but "
                               f"Dynamo logged {hits} cache hits and {refused} refusals: "
                               f"{again - hits - refused} traced again without a reason",
                       details={"label": "reuse:missed", "again": again, "hits": hits, "refused": refused})
    return Verdict(NAME, Status.PASS, where="reuse")
