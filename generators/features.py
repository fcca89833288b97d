"""What a program exercises, as a set of feature names: the generator report's
vocabulary. ``universe()`` lists every feature the generator is meant to reach,
derived from the catalogues, so a new op or structure is counted without edits
here."""

from __future__ import annotations

from dataclasses import fields

from .interludes import INTERLUDES
from .ir import FLOWS, LAYOUTS, OUTPUT_STYLES, STRUCTURES, VIEWS, Arg, Const, Context, Program, Ref, value_kind
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
    return out


def features(program: Program) -> set[str]:
    b = program.block
    out: set[str] = {f"block:{b.kind}", f"outputs:{program.outputs}"}
    ops = {s.op: OPS[s.op] for s in b.body}
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
    if b.compile_region:
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
    groups = program.identical_repeats()
    if any(len(g) > 1 for g in groups):
        out.add("identical_repeats")
    if len(groups) > 1:
        out.add("differing_repeats")
    return out
