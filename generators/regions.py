"""Where ``nested_compile_region`` marks a program, and its metamorphic twins.

The decorator promises only reuse: a marked block traced once and called
again must compute what the unmarked block computes. So the same program with
the decorator removed, or moved to another level of the block hierarchy,
must give the same outputs, gradients and mutated inputs. These are pure
functions of the IR; ``""`` names the layer block, as ``Block.name`` does.
"""

from __future__ import annotations

from dataclasses import replace

from .autograd import FEATURES as AUTOGRAD
from .ir import Block, Program


def levels(program: Program) -> dict[str, int]:
    """The shallowest level each block is called at (the layer is level 1)."""
    out = {"": 1}
    todo = [program.block]
    while todo:
        b = todo.pop(0)
        for name, _ in b.children():
            if name not in out:
                out[name] = out[b.name] + 1
                todo.append(program.sub(name))
    return out


def marked(program: Program) -> list[str]:
    """Names of the blocks decorated with ``nested_compile_region``."""
    return [b.name for b in program.blocks() if b.compile_region]


def with_regions(program: Program, names: set[str]) -> Program:
    """``program`` with exactly the blocks in ``names`` decorated."""

    def mark(b: Block) -> Block:
        return b if b.compile_region == (b.name in names) else replace(b, compile_region=b.name in names, reuse="")

    return replace(program, block=mark(program.block), subs=tuple(mark(b) for b in program.subs))


def without_regions(program: Program) -> Program:
    return with_regions(program, set())


def _neighbours(program: Program, name: str) -> list[str]:
    """The blocks one level away from ``name``: its parents, then its children."""
    parents = [b.name for b in program.blocks() if name in {n for n, _ in b.children()}]
    children = (n for n, _ in program.block_named(name).children())
    return [*dict.fromkeys(parents), *dict.fromkeys(children)]


def moves(program: Program) -> list[tuple[str, Program]]:
    """(label, twin) for each way to move one decorator to a neighbouring,
    undecorated level: ``"level2->level1"`` moves it from a level-2 block to
    its level-1 parent."""
    depth = levels(program)
    now = set(marked(program))
    out = []
    for name in marked(program):
        for other in _neighbours(program, name):
            if other not in now and not (other == "" and _side_effects_in_body(program)):
                label = f"level{depth[name]}->level{depth[other]}"
                out.append((label, with_regions(program, (now - {name}) | {other})))
    return out


def _side_effects_in_body(program: Program) -> bool:
    """The layer's body has a hook with a side effect (generators.autograd): it cannot be a region body."""
    return any(AUTOGRAD[n].place == "body" and not AUTOGRAD[n].pure for n in program.options.autograd)


def twins(program: Program) -> list[tuple[str, Program]]:
    """Every metamorphic twin of a program with a decorator: removed, then moved."""
    if not marked(program):
        return []
    return [("removed", without_regions(program)), *moves(program)]
