"""What a program exercises, as a set of feature names: the generator report's
vocabulary. ``universe()`` lists every feature the generator is meant to reach,
derived from the catalogues, so a new op or structure is counted without edits
here."""

from __future__ import annotations

from dataclasses import fields

from .interludes import INTERLUDES
from .ir import (CHILD, FLOWS, HOLDERS, LAYOUTS, MAX_DEPTH, OUTPUT_STYLES, STRUCTURES, VIEWS, Arg, Block, Const,
                 Context, Program, Ref, value_kind)
from .ops import OPS, W

PYTHON_KINDS = ("int", "float", "bool", "str", "NoneType", "tuple", "list", "slice", "dtype")
TENSOR_VARIATIONS = ("shape", "dtype", "requires_grad", "layout", "view")


def universe() -> list[str]:
    out = [f"op:{name}" for name in OPS]
    out += [f"structure:{s}" for s in STRUCTURES]
    out += [f"flow:{f}" for f in FLOWS]
    out += [f"outputs:{o}" for o in OUTPUT_STYLES]
    out += ["block:function", "block:module", "module:instances", "module:attributes", "module:frozen",
            "module:buffers", "nested_compile_region", "sections:2", "interleaved", "dag"]
    out += [f"interlude:{k}" for k in INTERLUDES] + ["graph_break"]
    out += [f"python:{k}" for k in PYTHON_KINDS] + ["args:per_repeat", "args:keyword", "args:positional"]
    out += [f"varies:arg:{k}" for k in PYTHON_KINDS]
    out += [f"varies:tensor:{k}" for k in TENSOR_VARIATIONS]
    out += [f"varies:context:{f.name}" for f in fields(Context)]
    out += [f"context:{f.name}" for f in fields(Context)] + ["varies:frozen"]
    out += [f"layout:{lay}" for lay in LAYOUTS] + [f"call_view:{v}" for v in VIEWS if v != "none"]
    out += ["input_dtype:float64", "input_dtype:bfloat16"]
    out += ["mutates:input", "mutates:intermediate", "mutates:through_view", "mutates:buffer"]
    out += ["dynamic:compile", "dynamic:mark", "dynamic:maybe_mark", "fullgraph", "random", "identical_repeats",
            "differing_repeats"]
    out += HIERARCHY
    return out


# The block hierarchy: how many blocks, how deep, how calls of different blocks
# interleave in one body, and where nested_compile_region marks it.
PATTERNS = ("repeat", "grouped", "alternating", "distinct")
REGIONS = ("layer", "inner", "both", "inner_in_undecorated")
HIERARCHY = [
    "blocks:1", "blocks:2", "blocks:3+", *(f"depth:{d}" for d in range(1, MAX_DEPTH + 1)),
    "sub:function", "sub:module", "sub:weights", "shared_child", "transformer", "calls:fed",
    *(f"holder:{h}" for h in HOLDERS), *(f"calls:{p}" for p in PATTERNS), *(f"region:{r}" for r in REGIONS),
]


def call_pattern(b: Block) -> str | None:
    """How the child calls of one body interleave: A A (repeat), A A B B
    (grouped), A B A B (alternating), A B C (distinct); None below two calls."""
    names = [n for n, _ in b.children()]
    if len(names) < 2:
        return None
    runs = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
    if len(set(names)) == 1:
        return "repeat"
    if len(runs) > len(set(runs)):
        return "alternating"
    return "grouped" if len(runs) < len(names) else "distinct"


def _fed(b: Block) -> bool:
    """Plain code reads one child call's result and feeds another child call."""
    made = {s.out: s for s in b.body}
    from_child: set[str] = set()
    for s in b.body:
        refs = {o.name for o in s.operands if isinstance(o, Ref)}
        if s.op == CHILD and refs & from_child and not any(made[r].op == CHILD for r in refs if r in made):
            return True
        if s.op == CHILD or refs & from_child:
            from_child.add(s.out)
    return False


def _transformer(b: Block) -> bool:
    """norm -> child -> residual, twice in a row."""
    ops = [s.op for s in b.body]
    shape = ["layer_norm", CHILD, "merge_add"]
    return any(ops[i:i + 6] == shape * 2 for i in range(len(ops)))


def hierarchy_features(program: Program) -> set[str]:
    n = len(program.blocks())
    out = {f"blocks:{n if n < 3 else '3+'}", f"depth:{program.depth()}"}
    parents: dict[str, set[str]] = {}
    for b in program.blocks():
        for name, _ in b.children():
            parents.setdefault(name, set()).add(b.name)
        pattern = call_pattern(b)
        if pattern:
            out.add(f"calls:{pattern}")
        if _fed(b):
            out.add("calls:fed")
        if b.kind == "module" and any(program.sub(c).kind == "module" for c, _ in b.children()):
            out.add(f"holder:{b.holder}")
    for sb in program.subs:
        out.add(f"sub:{sb.kind}")
        if sb.weights:
            out.add("sub:weights")
    if any(len(p) > 1 for p in parents.values()):
        out.add("shared_child")
    if _transformer(program.block):
        out.add("transformer")
    marked = {b.name for b in program.blocks() if b.compile_region}
    if "" in marked:
        out.add("region:both" if len(marked) > 1 else "region:layer")
    elif marked:
        out.add("region:inner")
    if any(name in marked and not (parents[name] & marked) for name in parents):
        out.add("region:inner_in_undecorated")
    return out


def features(program: Program) -> set[str]:
    b = program.block
    out: set[str] = {f"block:{b.kind}", f"outputs:{program.outputs}"}
    ops = {s.op: OPS[s.op] for blk in program.blocks() for s in blk.body}
    out |= {f"op:{name}" for name in ops}
    for s in program.sections:
        out |= {f"structure:{s.structure}", f"flow:{s.flow}"}
        if b.args and not b.attrs:
            out.add("args:keyword" if s.keywords else "args:positional")
        if s.interleave:
            out |= {f"interlude:{s.interleave}", "interleaved"}
            if INTERLUDES[s.interleave].breaks:
                out.add("graph_break")
        for c in s.calls:
            if c.view != "none":
                out.add(f"call_view:{c.view}")
            out |= {f"context:{f.name}" for f in fields(Context) if getattr(c.context, f.name) is not None}
        if b.kind == "module" and s.structure in ("module_list", "calls"):
            out.add("module:instances")
        if any(c.frozen for c in s.calls):
            out.add("module:frozen")
    if len(program.sections) > 1:
        out.add("sections:2")
    for name in program.interludes:
        if name:
            out |= {f"interlude:{name}", "interleaved"}
            if INTERLUDES[name].breaks:
                out.add("graph_break")
    if b.attrs:
        out.add("module:attributes")
    if b.buffers:
        out.add("module:buffers")
    if any(blk.compile_region for blk in program.blocks()):
        out.add("nested_compile_region")
    if b.args:
        out.add("args:per_repeat")
    rows = [c.args for _, c in program.repeats()]
    for stmt in b.body:
        for o in stmt.operands:
            if isinstance(o, Const):
                out.add(f"python:{value_kind(o.value)}")
            if isinstance(o, Arg):
                j = b.args.index(o.name)
                out |= {f"python:{value_kind(r[j])}" for r in rows}
    for kind in program.variations():
        if kind.startswith("arg:"):
            out |= {f"varies:arg:{k}" for k in kind[4:].split("/")}
        else:
            out.add(f"varies:{kind}")
    for _, spec in program.inputs:
        out.add(f"layout:{spec.layout}")
        if spec.dtype != "float32":
            out.add(f"input_dtype:{spec.dtype}")
    reads: dict[str, int] = {}
    produced = {s.out: OPS[s.op] for s in b.body}
    for stmt in b.body:
        refs = [o.name for o in stmt.operands if isinstance(o, Ref)]
        for name in refs:
            reads[name] = reads.get(name, 0) + 1
        op = OPS[stmt.op]
        if op.inplace:
            target = refs[0]
            out.add("mutates:input" if target in b.inputs else "mutates:intermediate")
            if op.statement:
                out.add("mutates:through_view")
        if any(isinstance(slot, W) and slot.buffer for slot in op.slots):
            out.add("mutates:buffer")
    if any(n > 1 for n in reads.values()) or len(b.inputs) > 1:
        out.add("dag")
    if any(op.random for op in produced.values()):
        out.add("random")
    if program.options.dynamic:
        out.add("dynamic:compile")
    for _, _, strict in program.options.mark_dynamic:
        out.add("dynamic:mark" if strict else "dynamic:maybe_mark")
    if program.options.fullgraph:
        out.add("fullgraph")
    out |= hierarchy_features(program)
    groups = program.identical_repeats()
    if any(len(g) > 1 for g in groups):
        out.add("identical_repeats")
    if len(groups) > 1:
        out.add("differing_repeats")
    return out
