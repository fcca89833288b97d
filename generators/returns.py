"""What a block returns (``Block.returns``): the shapes of a region's outputs
that the dedup pass's output rewiring, ``invoke_subgraph``'s outputs and
AOTAutograd's aliased-output handling each treat apart.

One entry per kind, as data: the container its items come in, the second
item beside the block's result (a template over ``{r}``, the result;
``{x}``, the block's primary input; ``{v}``, the first value the body
computes), and whether callers read that item. The result is always the
first item, and what the program carries on; the second item of a layer
call goes to the program's outputs (``aux``) when read. Sub-block callers
take the first item alone: a region output no caller reads. Python decides
what each returns, so repeats compute what they computed before: the ground
truth does not move. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .ir import Program, with_block


@dataclass(frozen=True)
class Return:
    name: str
    rule: str  # what the caller gets, one line
    second: str  # the item beside the result
    container: str = "tuple"  # tuple, list, dict
    read: bool = True  # a layer caller keeps the second item among the program's outputs
    alternate: bool = False  # ... every other layer call only, from the second: the first region's users are not all
    python: bool = False  # the second item is a Python value, not a tensor (or None)
    fullgraph: bool = True  # Dynamo captures it in one graph (else a graph break at the data-dependent size)
    view: bool = False  # the second item is a view (autograd rejects one made without grad of what requires it)
    shares: bool = False  # the second item is a tensor the block has already (its result, its input): one storage


SINGLE = "single"
RETURNS_LIST = (
    Return("tuple", "a tuple of the result and another value", "{v}"),
    Return("list", "a list of the result and another value", "{v}", container="list"),
    Return("dict", "a dict of the result and another value", "{v}", container="dict"),
    Return("twice", "the same tensor twice", "{r}", shares=True),
    Return("input", "the block's input returned unchanged beside the result", "{x}", shares=True),
    Return("input_view", "a view of the block's input beside the result", "{x}.unsqueeze(0)", view=True),
    Return("alias", "an output that is a view of another output", "{r}.unsqueeze(0)", view=True),
    Return("size", "a Python number computed from the result's size", "{r}.numel()", python=True),
    Return("none", "None beside the result", "None", python=True),
    Return("unread", "an output no caller reads", "{v}", read=False),
    # the pass gives a group's subgraph every output some member's callers read (_get_all_output_indices)
    Return("alternate", "an output every other caller reads, from the second", "{v}", alternate=True),
    Return("data_dependent", "a tensor whose size depends on the result's values", "{r}[{r} != 0]",
           fullgraph=False),
)
RETURNS: dict[str, Return] = {r.name: r for r in RETURNS_LIST}
KEYS = ("out", "aux")  # a dict's keys


def return_line(kind: str, result: str, primary: str, first: str) -> str:
    """The block's return statement."""
    if kind == SINGLE:
        return f"return {result}"
    r = RETURNS[kind]
    second = r.second.format(r=result, x=primary, v=first)
    if r.container == "dict":
        return f"return {{{KEYS[0]!r}: {result}, {KEYS[1]!r}: {second}}}"
    if r.container == "list":
        return f"return [{result}, {second}]"
    return f"return {result}, {second}"


def item(kind: str, value: str, index: int) -> str:
    """Item ``index`` (0: the result) of what a call returned."""
    return f"{value}[{KEYS[index]!r}]" if RETURNS[kind].container == "dict" else f"{value}[{index}]"


def read_lines(kind: str, got: str, aux: str, seen: str) -> list[str]:
    """What a layer call does with the second item of what it returned (``got``): keep it among the
    program's outputs (``aux``), always or every other call (``seen`` counts the calls)."""
    if not reads_second(kind):
        return []
    keep = f"{aux}.append({item(kind, got, 1)})"
    if not RETURNS[kind].alternate:
        return [keep]
    return [f"{seen}.append(None)", f"if len({seen}) % 2 == 0:", f"    {keep}"]


def reads_second(kind: str) -> bool:
    """A layer returning ``kind`` gives its callers a second item they keep (the program's ``aux`` outputs)."""
    return kind != SINGLE and RETURNS[kind].read


def returning(program: Program, name: str, kind: str) -> Program:
    """``program`` with block ``name`` ("" the layer) returning ``kind``, its
    outputs made a tuple where the layer's calls now give the program more to
    return (unchecked)."""
    program = with_block(program, replace(program.block_named(name), returns=kind))
    if reads_second(kind) and program.outputs == "single":
        program = replace(program, outputs="tuple")
    return program
