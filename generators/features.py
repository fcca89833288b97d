"""What a program exercises, as a set of feature names: the generator report's
vocabulary. ``universe()`` lists every feature the generator is meant to reach,
derived from the catalogues, so a new op or structure is counted without edits
here."""

from __future__ import annotations

from dataclasses import fields

from .inputs import TAKES
from .returns import RETURNS, SINGLE
from .settings import SETTINGS
from .autograd import FEATURES as AUTOGRAD
from .differences import DIFFERENCES, between_calls
from .differences import reached as differences_reached
from .interludes import INTERLUDES
from .ir import (ALIASES, CHILD, EXTRAS, FLOWS, HOLDERS, HOMES, LAYOUTS, MAX_DEPTH, OUTPUT_STYLES, PACKS, SETTABLE,
                 STRUCTURES, VIEWS, WRITES, Arg, Block, Const, Context, Fn, Free, Program, Ref, Value, edge_kind,
                 value_kind)
from .ops import EDGES, OPS, S, W
from .spellings import drawn_kinds

PYTHON_KINDS = ("int", "float", "bool", "str", "NoneType", "tuple", "list", "slice", "dtype", "callable", "subclass")
TENSOR_VARIATIONS = ("shape", "dtype", "requires_grad", "layout", "view")
# The edges of the values the ops' Python slots take (ops.EDGES), and values
# equal under ``==`` but of different types (1, 1.0, True): a guard or cache
# that compares with ``==`` or in 32 bits mistakes one for another.
EDGE_KINDS = (*dict.fromkeys(k for values in EDGES.values() for v in values if (k := edge_kind(v))), "equal_types")
# Where a Python value sits: a literal, a per-call argument (packed or not), a
# free value (its binding or a rebinding in the forward), or per-instance state
# (module attributes, closure cells of function instances).
PLACES = ("const", "arg", "free", "attr")


def universe() -> list[str]:
    out = [f"op:{name}" for name in OPS if OPS[name].category != "opinfo"]  # the sweep's, counted by op coverage
    out += [f"structure:{s}" for s in STRUCTURES]
    out += [f"flow:{f}" for f in FLOWS]
    out += [f"outputs:{o}" for o in OUTPUT_STYLES]
    out += ["block:function", "block:module", "module:instances", "module:attributes", "module:frozen",
            "module:buffers", "nested_compile_region", "nested_compile_region:reuse_hash", "sections:2",
            "interleaved", "dag"]
    out += [f"interlude:{k}" for k in INTERLUDES] + ["graph_break"]
    out += [f"python:{k}" for k in PYTHON_KINDS] + ["args:per_repeat", "args:keyword", "args:positional"]
    out += [f"varies:arg:{k}" for k in PYTHON_KINDS]
    out += [f"edge:{k}" for k in EDGE_KINDS] + [f"edge_in:{p}" for p in PLACES]
    out += [f"home:{h}" for h in HOMES] + [f"in_call:set:{h}" for h in SETTABLE] + ["in_call:attr"]
    out += [f"in_call:write:{w}" for w in WRITES] + [f"varies:set:{h}" for h in SETTABLE] + ["varies:alias"]
    out += [f"alias:{a}" for a in ALIASES if a] + [f"extras:{e}" for e in EXTRAS[1:]]
    out += [f"alias:in_{e}" for e in EXTRAS[1:]] + [f"pack:{p}" for p in PACKS if p]
    out += ["closure:instances", "closure:callable"]
    out += [f"varies:tensor:{k}" for k in TENSOR_VARIATIONS]
    out += [f"varies:context:{f.name}" for f in fields(Context)]
    out += [f"context:{f.name}" for f in fields(Context)] + ["varies:frozen"]
    out += [f"bracket:{f.name}" for f in fields(Context)]  # one bracket around a section's calls (Section.bracket)
    out += [f"layout:{lay}" for lay in LAYOUTS] + [f"call_view:{v}" for v in VIEWS if v != "none"]
    out += ["input_dtype:float64", "input_dtype:bfloat16"]
    out += ["mutates:input", "mutates:intermediate", "mutates:through_view", "mutates:buffer"]
    out += ["dynamic:compile", "dynamic:mark", "dynamic:maybe_mark", "fullgraph", "random", "identical_repeats",
            "differing_repeats"]
    out += HIERARCHY + GUARDS
    out += [f"difference:{d.name}" for d in DIFFERENCES]
    out += [f"spelling:{k}" for k in drawn_kinds()]
    out += [f"setting:{name}" for name in SETTINGS]
    out += [f"autograd:{name}" for name in AUTOGRAD]
    out += [f"{where}:{kind}" for where in ("returns", "sub_returns") for kind in RETURNS]
    out += [f"given:{t.name}:{v}" for t in TAKES.values() for v, _ in t.variants]
    out += [f"sub_takes:{t.name}" for t in TAKES.values() if t.sub]
    out += [f"varies:given:{t.name}" for t in TAKES.values() if len(t.variants) > 1]
    return out


# The block hierarchy: how many blocks, how deep, how calls of different blocks
# interleave in one body, and where nested_compile_region marks it.
PATTERNS = ("repeat", "grouped", "alternating", "distinct")
# nested: a decorated block calling decorated blocks twice or more (an outer invoke_subgraph body holding inner
# calls: torch's nested-subgraph path), whatever else is marked
REGIONS = ("layer", "inner", "both", "inner_in_undecorated", "nested")
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
    if nested_regions(program):
        out.add("region:nested")
    return out


def nested_regions(program: Program) -> bool:
    """A decorated block that calls decorated blocks at least twice."""
    return any(b.compile_region and sum(program.sub(n).compile_region for n, _ in b.children()) >= 2
               for b in program.blocks())


def python_values(program: Program) -> list[tuple[str, object, list[Value]]]:
    """Every Python operand of every block as (PLACES entry, slot, its value
    in each repeat); a free value rebound in the forward has one per repeat.
    A child call's name and slot are structure, not values, and are left out."""
    b = program.block
    calls = [c for _, c in program.repeats()]
    frees = {f.name: f for f in program.frees}
    out: list[tuple[str, object, list[Value]]] = []
    for blk in program.blocks():
        for stmt in blk.body:
            if stmt.op == CHILD:
                continue
            for slot, o in zip(OPS[stmt.op].slots, stmt.operands):
                if isinstance(o, Const):
                    out.append(("const", slot, [o.value]))
                elif isinstance(o, Arg) and blk is b:
                    j = b.args.index(o.name)
                    out.append(("attr" if b.attrs else "arg", slot, [c.args[j] for c in calls]))
                elif isinstance(o, Free) and o.name in frees:
                    sets = [dict(c.sets)[o.name] for c in calls if o.name in dict(c.sets)]
                    out.append(("free", slot, [frees[o.name].value, *sets]))
    return out


def _equal_types(values: list[Value]) -> bool:
    """Two numbers equal under ``==`` but of different types (1, 1.0, True; 0, -0.0, False)."""
    numbers = [v for v in values if isinstance(v, (int, float))]
    return any(a == c and type(a) is not type(c) for i, a in enumerate(numbers) for c in numbers[i + 1:])


def value_features(program: Program) -> set[str]:
    """The base type of every Python value (python:float for 1.0 and NaN
    alike), the edge values and where they sit, and equal values of different
    types: within one slot across repeats, or anywhere among the values of
    slots that take numbers (S.edges; a dim of -1 beside a scale of -1.0 is
    no edge)."""
    out: set[str] = set()
    numbers: list[Value] = []
    for place, slot, values in python_values(program):
        for v in values:
            out.add(f"python:{value_kind(v).split('(')[0]}")
            if edge_kind(v):
                out |= {f"edge:{edge_kind(v)}", f"edge_in:{place}"}
        if _equal_types(values):
            out |= {"edge:equal_types", f"edge_in:{place}"}
        if isinstance(slot, S) and slot.edges:
            numbers += values
    if _equal_types(numbers):
        out.add("edge:equal_types")
    return out


def taken_features(program: Program) -> set[str]:
    """What the layer is given beside its tensors, per variant a repeat passes, and what sub-blocks take."""
    b = program.block
    given = {c.given for _, c in program.repeats()} if b.takes else set()
    return {f"given:{b.takes}:{v}" for v in given} | {f"sub_takes:{sb.takes}" for sb in program.subs if sb.takes}


def object_features(program: Program) -> set[str]:
    """Where free values live, what the forward changes between two calls
    (rebinding a free value, writing an extra input), how inputs alias and are
    packed, and the user objects that carry Python values."""
    b = program.block
    calls = [c for _, c in program.repeats()]
    homes = {f.name: f.home for f in program.frees}
    out = {f"home:{h}" for h in homes.values()}
    for name in {n for c in calls for n, _ in c.sets}:
        out.add(f"in_call:set:{homes[name]}")
        if homes[name] == "class_attr" and b.kind == "module":
            out.add("in_call:attr")  # rebinds an instance attribute shadowing the class's
    out |= {f"in_call:write:{s.write[1]}" for s in program.sections if s.write}
    aliases = {c.alias for c in calls if c.alias}
    out |= {f"alias:{a}" for a in aliases}
    if b.extras != "positional":
        out.add(f"extras:{b.extras}")
        if aliases:
            out.add(f"alias:in_{b.extras}")
    if b.pack:
        out.add(f"pack:{b.pack}")
    if b.kind == "function" and b.attrs:
        out.add("closure:instances")
    held = [f.value for f in program.frees if f.home == "closure"]
    if b.kind == "function" and b.attrs:
        held += [v for c in calls for v in c.args]
    if any(isinstance(v, Fn) for v in held):
        out.add("closure:callable")
    return out


# Changes between calls at the edges (generators.variants): a value crossing
# to its other signed zero or to NaN, of another length or another callable
# (in any home), a new function object of the same code, a submodule replaced
# by each route, two inputs made one, a field of the same object changed.
GUARD_QUALIFIERS = ("sign", "nan", "length", "callable")
MODULE_ROUTES = ("setattr", "modules_dict", "add_module", "delattr", "container")
GUARD_KINDS = ("closure:remake", *(f"module:replace:{r}" for r in MODULE_ROUTES), "module:load_state_dict",
               "input:alias:make", "input:alias:view", "object:dataclass", "object:namespace",
               "object:dict", "object:pack:dataclass", "object:pack:module")
GUARDS = [*(f"guard:{q}" for q in GUARD_QUALIFIERS), *(f"guard:{k}" for k in GUARD_KINDS)]


def guard_features(program: Program) -> set[str]:
    """The edge changes between calls the program offers (variants it accepts)."""
    from .variants import variants  # the changes a program offers are the generator's to say

    out: set[str] = set()
    offered = variants(program)
    for v in offered:
        out |= {f"guard:{q}" for q in GUARD_QUALIFIERS if v.kind.endswith(f":{q}")}
        out |= {f"guard:{k}" for k in GUARD_KINDS if v.kind == k or v.kind.startswith(f"{k}:")}
    out |= {f"difference:{name}" for name in between_calls(program, [v.kind for v in offered])}
    return out


def features(program: Program) -> set[str]:
    b = program.block
    out: set[str] = {f"block:{b.kind}", f"outputs:{program.outputs}"}
    ops = {s.op: OPS[s.op] for blk in program.blocks() for s in blk.body}
    out |= {f"op:{name}" for name in ops}
    out |= {f"spelling:{s.spelling}" for blk in program.blocks() for s in blk.body if s.spelling}
    for s in program.sections:
        out |= {f"structure:{s.structure}", f"flow:{s.flow}"}
        if b.args and not b.attrs and not b.pack:
            out.add("args:keyword" if s.keywords else "args:positional")
        if s.interleave:
            out |= {f"interlude:{s.interleave}", "interleaved"}
            if INTERLUDES[s.interleave].breaks:
                out.add("graph_break")
        for c in s.calls:
            if c.view != "none":
                out.add(f"call_view:{c.view}")
            out |= {f"context:{f.name}" for f in fields(Context) if getattr(c.context, f.name) is not None}
        if s.bracket:
            out |= {f"bracket:{f.name}" for f in fields(Context) if getattr(s.calls[0].context, f.name) is not None}
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
    if b.attrs and b.kind == "module":
        out.add("module:attributes")
    if b.buffers:
        out.add("module:buffers")
    if any(blk.compile_region for blk in program.blocks()):
        out.add("nested_compile_region")
    if any(blk.reuse == "hash" for blk in program.blocks()):
        out.add("nested_compile_region:reuse_hash")
    if b.args:
        out.add("args:per_repeat")
    out |= value_features(program) | object_features(program)
    out |= {f"difference:{name}" for name in differences_reached(program)}
    for kind in program.variations():
        if kind.startswith("how:"):
            continue
        if kind.startswith("arg:"):  # by base type: arg:float(nan)/float is a float argument
            out |= {f"varies:arg:{k.split('(')[0]}" for k in kind[4:].split("/")}
        elif kind.startswith("set:"):
            out.add(f"varies:set:{kind.split(':')[1]}")
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
    out |= {f"setting:{name}" for name in program.options.settings}
    out |= {f"autograd:{name}" for name in program.options.autograd}
    out |= {f"{'sub_returns' if blk.name else 'returns'}:{blk.returns}" for blk in program.blocks()
            if blk.returns != SINGLE}
    out |= taken_features(program)
    out |= hierarchy_features(program) | guard_features(program)
    groups = program.identical_repeats()
    if any(len(g) > 1 for g in groups):
        out.add("identical_repeats")
    if len(groups) > 1:
        out.add("differing_repeats")
    return out
