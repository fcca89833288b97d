"""A program without one feature: what a known issue says it needs, taken away.

A known issue that names what triggers it (in-place writes, random ops, a
default-dtype change, function instances) claims only the failures that go
away without it (reports.unmask). Each function here gives the same program
with the feature removed and everything else kept, or None where what is left
is not a valid program (the checker decides, as for every reducer cut).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from .check import check
from .ir import MalformedProgram, Program, Ref, Stmt, with_block
from .ops import OPS, W
from .reduce import _bypass, _tidy, _tidy_sub, _unset
from .regions import marked, without_regions
from .variation import equalize

SUBCLASS = "type:tensor_subclass"  # generators.forms: the primary passed as a torch.Tensor subclass instance


def _checked(program: Program) -> Optional[Program]:
    try:
        check(program)
    except MalformedProgram:
        return None
    return program


def _bypassing(program: Program, drop: Callable[[Stmt], bool]) -> Program:
    """Every statement ``drop`` picks bypassed, in every block: its readers
    read the tensor it wrote (or drew from)."""
    p = program
    for block in program.blocks():
        b, i = block, 0
        while i < len(b.body):
            stmt = b.body[i]
            refs = [o.name for o in stmt.operands if isinstance(o, Ref)]
            if stmt.op in OPS and drop(stmt) and refs:
                b = _bypass(b, i, refs[0])
            else:
                i += 1
        if b != block:
            p = with_block(p, b if not b.name else _tidy_sub(b))
    return _tidy(p)


def _writes(stmt: Stmt) -> bool:
    op = OPS[stmt.op]
    return op.inplace or any(isinstance(x, W) and x.buffer for x in op.slots)


def without_writes(program: Program) -> Optional[Program]:
    """No in-place write: not in a body (an input, an intermediate, a buffer) nor after a call."""
    p = _bypassing(program, _writes)
    return _checked(replace(p, sections=tuple(replace(s, write=None) for s in p.sections)))


def without_random(program: Program) -> Optional[Program]:
    return _checked(_bypassing(program, lambda s: OPS[s.op].random))


def _context_in_force(program: Program, *fields: str) -> Optional[Program]:
    """Every repeat under the state in force for ``fields`` of its ``Context``: no context manager of theirs
    around a call."""
    def plain(c):
        return replace(c, context=replace(c.context, **dict.fromkeys(fields)))

    sections = tuple(replace(s, calls=tuple(plain(c) for c in s.calls)) for s in program.sections)
    return _checked(replace(program, sections=sections))


def without_default_dtype(program: Program) -> Optional[Program]:
    """Every repeat under the default dtype in force (no ``set_default_dtype``)."""
    return _context_in_force(program, "default_dtype")


def without_fn_instances(program: Program) -> Optional[Program]:
    """A function block's Python arguments passed at the call, not closed over per instance."""
    b = program.block
    return _checked(replace(program, block=replace(b, attrs=False))) if b.kind == "function" and b.attrs else None



def without_grad_mode(program: Program) -> Optional[Program]:
    """Every repeat under the grad mode in force: no ``no_grad``/``enable_grad`` or ``inference_mode`` around a call."""
    return _context_in_force(program, "grad", "inference")


def without_autocast(program: Program) -> Optional[Program]:
    """Every repeat under the autocast state in force: no ``torch.autocast`` around a call."""
    return _context_in_force(program, "autocast")


def without_rebinds(program: Program) -> Optional[Program]:
    """No state rebound inside the compiled call (``Call.sets``): each free value holds what the first repeat saw."""
    names = {n for _, c in program.repeats() for n, _ in c.sets}
    return _checked(_unset(program, names)) if names else program


def without_reuse(program: Program) -> Program:
    """Every nested_compile_region body reused by Dynamo's guards, none by a key (``reuse_hash_fn``)."""
    for b in program.blocks():
        if b.reuse:
            program = with_block(program, replace(b, reuse=""))
    return program


def without_subclass(program: Program) -> Optional[Program]:
    """The primary passed as a plain tensor, where a call passed a torch.Tensor subclass instance."""
    if not any(call.how == SUBCLASS for _, call in program.repeats()):
        return None
    return equalize(program, [f"how:{SUBCLASS}"])


def without_decorators(program: Program) -> Optional[Program]:
    return without_regions(program) if marked(program) else None


# Every feature a known issue can need that a program can lose (what generators.mutate.untrigger draws from).
REMOVALS: dict[str, Callable[[Program], Optional[Program]]] = {
    "compile_region": without_decorators, "tensor_subclass": without_subclass, "mutation": without_writes,
    "random": without_random, "default_dtype": without_default_dtype, "fn_instances": without_fn_instances,
    "grad_mode": without_grad_mode,
}
