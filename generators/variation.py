"""Take a difference between repeats away, one kind at a time.

Triage asks which difference a failure needs: it gives every repeat the first
repeat's value for one kind of variation (``Program.variations``) and sees
whether the failure survives. The result is checked, so a variation that cannot
be removed on its own yields ``None``.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Optional

from .check import check
from .ir import Call, Context, MalformedProgram, Program


def _equalize_call(program: Program, kind: str, names: list[str], call: Call, first: Call) -> Call:
    if kind.startswith("arg:"):
        idx = {program.block.args.index(n) for n in names}
        args = tuple(first.args[j] if j in idx else v for j, v in enumerate(call.args))
        return replace(call, args=args)
    if kind.startswith("tensor:"):  # a call taking no tensor of its own (a chain's) has none to equalize
        return call if call.tensor is None else replace(call, tensor=first.tensor, view=first.view)
    if kind.startswith("context:"):
        field = kind.split(":", 1)[1]
        return replace(call, context=replace(call.context, **{field: getattr(first.context, field)}))
    if kind == "frozen":
        return replace(call, frozen=False)
    if kind.startswith("set:"):
        fixed = dict(first.sets)
        return replace(call, sets=tuple((n, fixed[n] if n in names else v) for n, v in call.sets))
    if kind == "alias":
        return replace(call, alias=first.alias)
    if kind.startswith("given:"):
        return replace(call, given=first.given)
    if kind.startswith("how:"):
        return replace(call, how="") if call.how == kind[4:] else call
    raise ValueError(f"unknown variation kind {kind!r}")


def equalize(program: Program, kinds: list[str]) -> Optional[Program]:
    """``program`` with the variations of ``kinds`` removed, or None if invalid."""
    variations = program.variations()
    calls = [c for _, c in program.repeats()]
    first = calls[0]
    if any(k.startswith("tensor:") for k in kinds):  # the tensor to give every call: the first call's that has one
        first = replace(first, tensor=next((c.tensor for c in calls if c.tensor is not None), first.tensor),
                        view=next((c.view for c in calls if c.tensor is not None), first.view))
    sections = []
    for s in program.sections:
        calls = list(s.calls)
        for kind in kinds:
            calls = [_equalize_call(program, kind, variations.get(kind, []), c, first) for c in calls]
        sections.append(replace(s, calls=tuple(calls)))
    candidate = replace(program, sections=tuple(sections))
    if any(k.startswith("context:") for k in kinds):
        candidate = _uniform_contexts(candidate)
    try:
        check(candidate)
    except MalformedProgram:
        return None
    return candidate


def _uniform_contexts(program: Program) -> Program:
    """Within a section a context field is set for every call or none."""
    sections = []
    for s in program.sections:
        calls = list(s.calls)
        for f in fields(Context):
            values = [getattr(c.context, f.name) for c in calls]
            if any(v is None for v in values) and any(v is not None for v in values):
                fill = next(v for v in values if v is not None)
                calls = [
                    replace(c, context=replace(c.context, **{f.name: fill}))
                    if getattr(c.context, f.name) is None
                    else c
                    for c in calls
                ]
        sections.append(replace(s, calls=tuple(calls)))
    return replace(program, sections=tuple(sections))
