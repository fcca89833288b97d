"""What a known issue needs, and the run without it.

A known issue names its triggers (``KnownIssue.triggers``), each alone enough
to avoid it: the deduplication pass, the ``nested_compile_region``
decorator, a tensor subclass argument, in-place writes, random ops, a
default-dtype change, function instances, a grad-mode switch, symbolic
shapes, an autograd feature (a hook, saved-tensor hooks, a partial or
higher-order gradient), an op carrying an effect token, inductor's constant
folding. Two uses:

- a failure that matches an issue in a run *without* one of its triggers is
  not that issue (``claimed``): it is named ``unexplained:<issue>:...``, a
  finding of its own (a new cause, or an issue whose record is wrong), so a
  known issue claims only what its trigger explains;
- a run that meets an issue is run again without each trigger it has
  (reports.unmask), so what the issue hid, or claimed, is judged.

Tags are program features that make a class of wrong values of their own,
carried into signatures (triage), so a known bug in one class cannot hide a
new one elsewhere.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from generators.check import draws_random, may_alias, mutates, sizes_follow_values, takes_tuple_element
from generators.features import python_values
from generators.ir import Program, ambient_state, edge_kind
from generators.opinfo import effectful
from generators.regions import marked, without_regions
from generators.without import (SUBCLASS, without_autocast, without_default_dtype, without_fn_instances,
                                without_grad_mode, without_random, without_rebinds, without_reuse, without_subclass,
                                without_writes)
from harness.outcome import RunConfig

from .known_issues import UNEXPLAINED, KnownIssue, matching

CLAIMED = "claimed_by"  # Finding.extra: the issue that explains a signature two issues match, when not the first


def tags(program: Program) -> list[str]:
    """Program features that make a class of wrong values of their own: in-place writes
    (the pass must keep mutations in order), default-dtype changes
    (factories must follow the dtype in force when they run), random ops
    (each region must draw what eager draws), nested_compile_region
    (a body traced once and reused) and function instances (each repeat
    calls its own function object made by one factory: one code object,
    its own closure cells)."""
    out = []
    if any(mutates(b) for b in program.blocks()) or any(s.write for s in program.sections):
        out.append("mutation")
    # a change of the default dtype: set_default_dtype(float32), the dtype in force, changes nothing
    if any(ambient_state(c.context)["default_dtype"] != "float32" for _, c in program.repeats()):
        out.append("default_dtype")
    if draws_random(program):
        out.append("random")
    if any(b.compile_region for b in program.blocks()):
        out.append("compile_region")
    if any(b.kind == "function" and b.attrs for b in program.blocks()):
        out.append("fn_instances")
    return out


Removal = Callable[[Program, RunConfig], tuple[Optional[Program], RunConfig]]


def _program_only(f: Callable[[Program], Optional[Program]]) -> Removal:
    return lambda p, c: (f(p), c)


def _tagged(tag: str) -> Callable[[Program, RunConfig], bool]:
    return lambda p, c: tag in tags(p)


def _in_context(*fields: str) -> Callable[[Program, RunConfig], bool]:
    """Whether a call runs inside a context manager of one of ``fields`` of its ``Context``."""
    return lambda p, c: any(getattr(call.context, f) is not None for _, call in p.repeats() for f in fields)


def _late_no_grad(p: Program, c: RunConfig) -> bool:
    """Two calls or more with grad on before the first with grad off (no_grad, inference_mode): a bracket whose
    switches the pass can hoist above the deduplicated calls before it."""
    on = 0
    for _, call in p.repeats():
        state = ambient_state(call.context)
        if not state["grad"] or state["inference"]:
            return on >= 2
        on += 1
    return False


# Door families whose operator is a higher-order op around the program's calls (as a decorated block is).
HIGHER_ORDER_DOORS = ("checkpoint", "control_flow")


def _higher_order(p: Program, c: RunConfig) -> bool:
    return bool(marked(p)) or p.options.door.split(":")[0] in HIGHER_ORDER_DOORS


def _without_higher_order(p: Program) -> Optional[Program]:
    """The decorators gone; a door's own higher-order op stays (the door run is judged for it)."""
    return without_regions(p) if p.options.door.split(":")[0] not in HIGHER_ORDER_DOORS else None


def _static(p: Program) -> Program:
    """Compiled with static shapes: no dynamic=True, nothing marked dynamic."""
    return replace(p, options=replace(p.options, dynamic=None, mark_dynamic=()))


def _setting(name: str) -> tuple[Callable[[Program, RunConfig], bool], Removal]:
    """A drawn setting (generators.settings) as a trigger: the run has it, and the run without it."""
    def without(p: Program) -> Program:
        return replace(p, options=replace(p.options, settings=tuple(s for s in p.options.settings if s != name)))

    return (lambda p, c: name in p.options.settings), _program_only(without)


FOLDING = "inductor.joint_graph_constant_folding"
HOOK_GUARDS = ("dynamo.skip_nnmodule_hook_guards", False)

# trigger -> (does this run have it?, the run without it: None where no valid program is left)
TRIGGERS: dict[str, tuple[Callable[[Program, RunConfig], bool], Removal]] = {
    "dedup": (lambda p, c: c.dedup, lambda p, c: (p, replace(c, dedup=False))),
    "compile_region": (lambda p, c: bool(marked(p)), _program_only(without_regions)),
    "tensor_subclass": (lambda p, c: any(call.how == SUBCLASS for _, call in p.repeats()),
                        _program_only(without_subclass)),
    "mutation": (_tagged("mutation"), _program_only(without_writes)),
    "random": (lambda p, c: draws_random(p), _program_only(without_random)),
    # any set_default_dtype in the forward, float32 too: a call made under another dtype (a guard variant) meets it
    "default_dtype": (_in_context("default_dtype"), _program_only(without_default_dtype)),
    "fn_instances": (_tagged("fn_instances"), _program_only(without_fn_instances)),
    "grad_mode": (_in_context("grad", "inference"), _program_only(without_grad_mode)),
    # a grad-off bracket after two calls or more with grad on (KI-171: the pass hoists its switches above them)
    "late_no_grad": (_late_no_grad, _program_only(without_grad_mode)),
    # a torch.autocast around a call (KI-006's brackets: the message it crashes with is not its alone)
    "autocast": (_in_context("autocast"), _program_only(without_autocast)),
    # repeats traced inside and outside autocast (an enabled bracket around some calls, none or a disabled one
    # around others): what regions merged across autocast need (KI-011); the same state in every bracket is not
    "autocast_mixed": (lambda p, c: len({bool(call.context.autocast) for _, call in p.repeats()}) > 1,
                       _program_only(without_autocast)),
    "higher_order": (_higher_order, _program_only(_without_higher_order)),
    # inputs or outputs of a block that may share storage (a view returned, a tensor passed twice): what a
    # higher-order operator's body refuses; no run is made without it
    "aliasing": (lambda p, c: may_alias(p), _program_only(lambda p: None)),
    "dynamic": (lambda p, c: bool(p.options.dynamic or p.options.mark_dynamic), _program_only(_static)),
    # every invoke_subgraph inlined after the pass (generators.settings inline.every)
    "inline": _setting("inline.every"),
    # the partitioner's memory budget (generators.settings partition.budget): it recomputes activations in the backward
    "budget": _setting("partition.budget"),
    # hooks, saved-tensor hooks, another way of asking for gradients (generators.autograd)
    "autograd": (lambda p, c: bool(p.options.autograd),
                 _program_only(lambda p: replace(p, options=replace(p.options, autograd=())))),
    # an OpInfo case calling an op torch threads an effect token through (linalg's error checks): the case
    # is the op under test, so no run is left without it
    "effects": (lambda p, c: effectful(p), _program_only(lambda p: None)),
    # a size or Python number the program computes from tensor values (x[x > 0], an unbacked op): a graph
    # break, and a later graph's input whose size changes between calls; no run is made without it
    "data_dependent": (lambda p, c: sizes_follow_values(p), _program_only(lambda p: None)),
    # a nested_compile_region body reused by the program's own key (reuse_hash_fn): Dynamo skips its side-effect check
    # state rebound inside the compiled call (a global, a field, a class attribute: Call.sets), which a reused
    # nested_compile_region body may not see
    "rebinds": (lambda p, c: any(call.sets for _, call in p.repeats()), _program_only(without_rebinds)),
    "reuse_key": (lambda p, c: any(b.compile_region and b.reuse for b in p.blocks()), _program_only(without_reuse)),
    # a getitem of a multi-output node (chunk(...)[-1], a decorated block's call) where a region may start: no run
    # is made without it
    "tuple_element": (lambda p, c: takes_tuple_element(p), _program_only(lambda p: None)),
    # a Python -0.0 the program holds (a global, a field, an argument): what a sign-of-zero bug needs; no run
    # is made without it
    "negative_zero": (lambda p, c: any(edge_kind(v) == "-0.0" for _, _, values in python_values(p) for v in values),
                      _program_only(lambda p: None)),
    # Dynamo skips the guards on a module's empty hook dicts (skip_nnmodule_hook_guards, its default): a frame
    # compiled for an instance without hooks serves one with them; the run with the guards on (setting guard.module_hooks)
    "hook_guards_skipped": (lambda p, c: HOOK_GUARDS not in c.torch_config and "guard.module_hooks" not in p.options.settings,
                            lambda p, c: (p, replace(c, torch_config=(*c.torch_config, HOOK_GUARDS)))),
    # inductor's constant folding of the joint graph (an algebraic rewrite the backend makes: x * 0 -> 0)
    "constant_folding": (lambda p, c: c.backend == "inductor" and (FOLDING, False) not in c.torch_config,
                         lambda p, c: (p, replace(c, torch_config=(*c.torch_config, (FOLDING, False))))),
}


def present(trigger: str, program: Program, config: RunConfig) -> bool:
    """Whether a run has a trigger; ``a|b``: either (an issue that needs one of two things)."""
    return any(TRIGGERS[t][0](program, config) for t in trigger.split("|"))


def removed(trigger: str, program: Program, config: RunConfig) -> tuple[Optional[Program], RunConfig]:
    """The run without a trigger (``a|b``: without both); None for the program where none is valid."""
    p: Optional[Program] = program
    c = config
    for t in trigger.split("|"):
        if p is not None and TRIGGERS[t][0](p, c):
            p, c = TRIGGERS[t][1](p, c)
    return p, c


def explains(issue: KnownIssue, program: Program, config: RunConfig) -> bool:
    """Whether the run has every trigger the issue needs."""
    return all(present(t, program, config) for t in issue.triggers)


def claimed(finding):
    """A finding (reports.triage.Finding) as triage names it: where its
    signature matches an issue whose trigger the run lacks, renamed
    ``unexplained:<issue>:<signature>`` and no longer that issue's."""
    issues = matching(finding.signature, finding.config.backend)
    if not issues:
        return finding
    explained = next((i for i in issues if explains(i, finding.program, finding.config)), None)
    if explained is not None:  # of two issues a signature matches, the one whose triggers the run has
        return replace(finding, extra={**finding.extra, CLAIMED: explained.id}) if explained is not issues[0] \
            else finding
    return replace(finding, signature=f"{UNEXPLAINED}:{issues[0].id}:{finding.signature}",
                   extra={**finding.extra, UNEXPLAINED: issues[0].id})
