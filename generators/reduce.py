"""Reductions of a program: smaller programs to try while minimizing a failure.

A fuzz finding is only as useful as its repro is small. Hypothesis shrinks the
choices that drew a program, but a program loaded from ``program.json`` (a
campaign's finding, a known issue) has no choice sequence left; this module
shrinks the IR itself. ``candidates`` proposes smaller programs, biggest cut
first, and keeps only those that ``check`` accepts, so the reducer needs no
knowledge of which cut matters for the bug: the caller's predicate decides
(``campaigns.minimize``). ``size`` is the measure every candidate strictly
decreases, which is what makes greedy minimization terminate.

Programs with a block hierarchy (``Program.subs``) shrink as a whole: a
sub-block call dropped (its readers read its input) or inlined into its
caller, a sub-block flattened into every caller, the whole hierarchy
flattened, each block's body cut like the layer's, decorators removed; every
candidate loses the sub-blocks nothing calls any more, so it stays valid.

The ways a repeat reaches its Python values and tensors shrink to the plainest
one: a free value rebound inside the forward (``Call.sets``) becomes a plain
free value, or is rebound to one value; a free value moves to a module
global; an edge value (signed zero, NaN, huge, int64, ``True`` for ``1``...)
becomes its slot's first ordinary choice; an extra input passed as the
primary or a view of it (``Call.alias``) is passed as itself; packed extra
inputs and Python arguments (``Block.extras``, ``Block.pack``) are passed one
by one; function instances made by a factory (``Block.attrs``) become one
function taking its arguments at the call; an in-place write between repeats
(``Section.write``) goes, or writes directly instead of through a view. A
statement written in another spelling of its op (``Stmt.spelling``) goes
back to the op's default, so a repro keeps a spelling only where the failure
needs it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace
from typing import Iterator, Optional

from .check import alias_type, block_types, check, env_of, has_columns, live_values, spec_type, stmt_type, sub_scope
from .values import Sub, base_value
from .ir import with_call as _with_call
from .ir import (
    CHILD,
    Arg,
    Block,
    Call,
    Const,
    Context,
    Free,
    Operand,
    Program,
    Ref,
    Section,
    Stmt,
    TensorSpec,
    Value,
    called,
    typed_key,
    respelled,
    taking,
    with_block,
    spelled,
)
from .ops import CALL_VIEWS, OPS, D, Reject, S, T, W
from .returns import SINGLE, returning

# --- the measure ------------------------------------------------------------------

# How much one unit of each component weighs in ``size``: whole sections first,
# then statements and repeats (what a reader of a repro counts), then named
# things (inputs, weights, args...), then flags that differ from the default
# and tensor extent. The weights only make ``size`` readable as "how big";
# termination needs just that every candidate lowers the sum.
WEIGHTS = {
    "sections": 1000,
    "blocks": 500,
    "statements": 100,
    "repeats": 100,
    "names": 10,
    "interludes": 10,
    "flags": 1,
    "extent": 1,
}

# Structures ranked from the plainest repro (separate calls) up.
_STRUCTURE_RANK = {"calls": 0, "for_range": 1, "for_values": 2, "for_tuple": 2, "while": 2, "module_list": 2, "nested": 3}
_OUTPUT_RANK = {"single": 0, "tuple": 1, "dict": 2}
# What a repeat passes as the first extra input, and how a section writes an
# input between repeats, plainest first (None: no write).
_ALIAS_RANK = {"": 0, "same": 1, "view": 2}
_WRITE_RANK = {None: 0, "direct": 1, "view": 2}


def measure(program: Program) -> dict[str, int]:
    """The components of ``size``, each a count that some reduction lowers:

    - sections; blocks (sub-blocks: the layer is always there); statements
      (every block's body, child calls included); repeats (sum of
      ``Section.count``, so a nested loop's outer trip count counts);
    - names: extra program inputs, extra block inputs, weights (of every
      block), buffers, block args, free values, sub-block calls;
    - interludes: non-empty interludes between sections and interleaves;
    - flags: non-default settings (context fields set, call-site views,
      per-repeat tensors (1 for the carried input, 2 for another), frozen
      instances, call-site forms and subclass values, statements spelled
      otherwise than their op's default, non-contiguous layouts,
      requires_grad and non-float32 inputs,
      structure rank, non-chain flow, output style rank, module blocks,
      compile_region (any block), attrs, holders other than attributes,
      levels below the layer, keywords, fullgraph, dynamic, mark_dynamic, a door, each setting,
      each block returning more than its result, each block taking `given`,
      each repeat passing another variant of it than the first;
      free values rebound in a call (one per call) and rebound to another
      value than the first repeat's (two each: rebinding every repeat to the
      first repeat's value may add an edge value), free values not held by
      a global, alias rank (1 the primary, 2 a view), packed extras, packed
      arguments, write rank (1 direct, 2 through a view), edge values
      (``_edge_count``));
    - extent: sum of (d - 1) over every dim of every input, weight and buffer.
    """
    b = program.block
    blocks = program.blocks()
    calls = [c for s in program.sections for c in s.calls]
    specs = [spec for _, spec in (*program.inputs, *b.buffers)] + [spec for x in blocks for _, spec in x.weights]
    first = program.inputs[0][0]
    flags = 0
    for c in calls:
        flags += sum(getattr(c.context, f.name) is not None for f in fields(Context))
        flags += (c.view != "none") + c.frozen
        flags += 0 if c.tensor is None else (1 if c.tensor == first else 2)
        flags += len(c.sets) + _ALIAS_RANK[c.alias] + bool(c.how)
        flags += sum(isinstance(v, Sub) for v in (*c.args, *(v for _, v in c.sets)))
    flags += len(spelled(program))
    flags += 2 * _set_spread(program) + sum(f.home != "global" for f in program.frees)
    flags += (b.extras != "positional") + bool(b.pack) + _edge_count(program)
    flags += sum(spec.layout != "contiguous" for spec in specs)
    flags += sum(spec.requires_grad + (spec.dtype != "float32") for _, spec in program.inputs)
    for s in program.sections:
        flags += _STRUCTURE_RANK[s.structure] + (s.flow != "chain") + s.keywords
        flags += _WRITE_RANK[s.write[1] if s.write else None]
    flags += _OUTPUT_RANK[program.outputs] + b.attrs
    flags += sum((x.kind == "module") + x.compile_region + bool(x.reuse) + (x.holder != "attr") for x in blocks)
    flags += _levels(program) - 1
    o = program.options
    flags += o.fullgraph + (o.dynamic is not None) + len(o.mark_dynamic) + bool(o.door) + len(o.settings) + len(o.autograd)
    flags += sum(x.returns != SINGLE for x in blocks) + sum(bool(x.takes) for x in blocks)
    flags += sum(c.given != calls[0].given for c in calls)  # repeats passing another variant than the first
    return {
        "sections": len(program.sections),
        "blocks": len(program.subs),
        "statements": sum(len(x.body) for x in blocks),
        "repeats": sum(s.count for s in program.sections),
        "names": len(program.inputs) - 1 + len(b.inputs) - 1 + sum(len(x.weights) for x in blocks) + len(b.buffers)
        + len(b.args) + len(program.frees) + sum(s.op == CHILD for x in blocks for s in x.body),
        "interludes": sum(i is not None for i in program.interludes)
        + sum(s.interleave is not None for s in program.sections),
        "flags": int(flags),
        "extent": sum(d - 1 for spec in specs for d in spec.shape),
    }


def _levels(program: Program) -> int:
    """``Program.depth``, or 1 for a hierarchy too broken to measure (a
    proposal ``check`` is about to turn down)."""
    try:
        return program.depth()
    except (ValueError, KeyError, RecursionError):
        return 1


def size(program: Program) -> int:
    """A weighted sum of ``measure`` (see WEIGHTS): every candidate is smaller."""
    return sum(WEIGHTS[k] * v for k, v in measure(program).items())


# --- the candidates ---------------------------------------------------------------


def candidates(program: Program, rejected: Optional[Counter] = None) -> Iterator[Program]:
    """Valid programs strictly smaller than ``program``, biggest cut first.

    ``rejected`` (optional) counts, per kind of reduction, the proposals that
    ``check`` turned down: which cuts the IR's invariants forbid most.
    """
    for _, candidate in labeled_candidates(program, rejected):
        yield candidate


def labeled_candidates(program: Program, rejected: Optional[Counter] = None) -> Iterator[tuple[str, Program]]:
    """``candidates`` with the kind of reduction each one made."""
    limit = size(program)
    seen = {program.to_json()}
    for label, proposal in proposals(program):
        if proposal is None:
            continue
        proposal = _reachable(_count_loops(proposal))
        key = proposal.to_json()
        if key in seen:
            continue
        seen.add(key)
        try:
            check(proposal)
            smaller = size(proposal) < limit
        # MalformedProgram (a ValueError) names the broken invariant; the
        # others mean a proposal too broken for check to name.
        except (ValueError, KeyError, IndexError, TypeError):
            if rejected is not None:
                rejected[label] += 1
            continue
        if smaller:
            yield label, proposal


def proposals(p: Program) -> Iterator[tuple[str, Optional[Program]]]:
    """Every reduction, unchecked, as (kind, program or None), biggest cut first."""
    b = p.block
    # Whole sections, with the interlude that separates them from the rest.
    if len(p.sections) > 1:
        for k in range(len(p.sections)):
            sections = p.sections[:k] + p.sections[k + 1:]
            gap = k - 1 if k else 0
            interludes = p.interludes[:gap] + p.interludes[gap + 1:]
            yield "drop_section", replace(p, sections=sections, interludes=interludes)
    # Half the calls of a section (trailing, then leading).
    for k, s in enumerate(p.sections):
        n = len(s.calls)
        if n >= 2:
            yield "halve_calls", _with_section(p, k, replace(s, calls=s.calls[: n // 2]))
            yield "halve_calls", _with_section(p, k, replace(s, calls=s.calls[n // 2:]))
    # One trip of the outer loop.
    for k, s in enumerate(p.sections):
        if s.outer > 1:
            yield "outer", _with_section(p, k, replace(s, outer=1, structure="for_range"))
            if s.outer > 2:
                yield "outer", _with_section(p, k, replace(s, outer=max(2, s.outer // 2)))
    # The block hierarchy: whole sub-blocks cut, biggest cut first.
    yield from _hierarchy_cuts(p)
    # The body of each block (the layer first): an earlier value as the
    # result, then dead code, then one statement at a time bypassed (its
    # readers read one of its operands).
    for blk in p.blocks():
        yield from _body_cuts(p, blk)
    # Single calls.
    for k, s in enumerate(p.sections):
        if len(s.calls) >= 2:
            for j in reversed(range(len(s.calls))):
                yield "drop_call", _with_section(p, k, replace(s, calls=s.calls[:j] + s.calls[j + 1:]))
    # Python values: a per-repeat argument or a free value becomes a literal.
    for j, name in enumerate(b.args):
        yield "arg_to_const", _drop_arg(p, j, name)
    if len(p.frees) > 1:
        yield "free_to_const", _inline_frees(p, {f.name for f in p.frees})
    for f in p.frees:
        yield "free_to_const", _inline_frees(p, {f.name})
    yield from _set_cuts(p)
    for f in p.frees:
        if f.home != "global":
            yield "free_home", replace(p, frees=tuple(replace(g, home="global", default=()) if g == f else g
                                                      for g in p.frees))
    # Named tensors nothing uses.
    yield "unused_state", _tidy(p)
    for name, _ in p.inputs[1:]:
        yield "drop_input", _drop_input(p, name)
    # Code between repeats.
    for k in range(len(p.interludes)):
        if p.interludes[k] is not None:
            yield "interlude", replace(p, interludes=p.interludes[:k] + (None,) + p.interludes[k + 1:])
    for k, s in enumerate(p.sections):
        if s.interleave is not None:
            yield "interleave", _with_section(p, k, replace(s, interleave=None))
        if s.bracket:  # a bracket per call again
            yield "bracket", _with_section(p, k, replace(s, bracket=False))
    # Structure, flow, outputs, block flags.
    for k, s in enumerate(p.sections):
        if s.structure != "calls":
            if s.outer > 1:  # unrolled: the same repeats, written out
                yield "structure", _with_section(p, k, replace(s, structure="calls", outer=1, calls=s.calls * s.outer))
            else:
                yield "structure", _with_section(p, k, replace(s, structure="calls"))
                if s.structure != "for_range" and not b.attrs:
                    yield "structure", _with_section(p, k, replace(s, structure="for_range"))
        if s.flow != "chain":
            calls = tuple(replace(c, tensor=None, view="none") for c in s.calls)
            yield "flow", _with_section(p, k, replace(s, flow="chain", calls=calls))
        if any(c.tensor is not None for c in s.calls):
            calls = tuple(replace(c, tensor=None, view="none") for c in s.calls)
            yield "call_tensor", _with_section(p, k, replace(s, calls=calls))
            first = p.inputs[0][0]
            for j, c in enumerate(s.calls):
                if c.tensor != first:
                    yield "call_tensor", _with_call(p, k, j, replace(c, tensor=first, view="none"))
        if s.keywords:
            yield "keywords", _with_section(p, k, replace(s, keywords=False))
    if p.outputs != "single" and not any(s.flow == "fanout" for s in p.sections):
        yield "outputs", replace(p, outputs="single")
    if p.outputs == "dict":
        yield "outputs", replace(p, outputs="tuple")
    if b.kind == "module" and not any(s.structure == "module_list" for s in p.sections):
        yield "block_kind", replace(p, block=replace(b, kind="function", attrs=False))
    for blk in p.blocks():  # a body reused by guards, not by a key
        if blk.reuse:
            yield "reuse", with_block(p, replace(blk, reuse=""))
    if b.compile_region:
        yield "compile_region", replace(p, block=replace(b, compile_region=False, reuse=""))
    for sb in p.subs:  # the decorator of each sub-block, the outermost first
        if sb.compile_region:
            yield "compile_region", with_block(p, replace(sb, compile_region=False, reuse=""))
    for blk in p.blocks():
        if blk.holder != "attr":
            yield "holder", with_block(p, replace(blk, holder="attr"))
    if b.attrs:  # module attributes or a factory's function instances: arguments passed at the call
        yield "attrs", replace(p, block=replace(b, attrs=False))
    if b.extras != "positional":
        yield "extras", replace(p, block=replace(b, extras="positional"))
    if b.pack:
        yield "pack", replace(p, block=replace(b, pack=""))
    yield from _alias_cuts(p)
    yield from _form_cuts(p)
    yield from _spelling_cuts(p)
    for k, s in enumerate(p.sections):
        if s.write is not None:
            yield "write", _with_section(p, k, replace(s, write=None))
            if s.write[1] != "direct":
                yield "write", _with_section(p, k, replace(s, write=(s.write[0], "direct")))
    # Compile options, and the door the program is reached through.
    o = p.options
    if o.door:
        yield "door", replace(p, options=replace(o, door=""))
    if o.fullgraph:
        yield "options", replace(p, options=replace(o, fullgraph=False))
    if o.dynamic is not None:
        yield "options", replace(p, options=replace(o, dynamic=None))
    for m in o.mark_dynamic:
        yield "options", replace(p, options=replace(o, mark_dynamic=tuple(x for x in o.mark_dynamic if x != m)))
    for b in p.blocks():
        if b.returns != SINGLE:
            yield "returns", returning(p, b.name, SINGLE)
        if b.takes:
            yield "takes", taking(p, b.name, "")
    givens = [c.given for s in p.sections for c in s.calls]
    if len(set(givens)) > 1:  # every repeat passing what the first passes, then one repeat at a time
        yield "given", _map_calls(p, lambda k, j, c: replace(c, given=givens[0]))
        for k, s in enumerate(p.sections):
            for j, c in enumerate(s.calls):
                if c.given != givens[0]:
                    yield "given", _map_calls(p, lambda kk, jj, cc, k=k, j=j: replace(cc, given=givens[0])
                                              if (kk, jj) == (k, j) else cc)
    for name in o.settings:
        yield "settings", replace(p, options=replace(o, settings=tuple(n for n in o.settings if n != name)))
    for name in o.autograd:
        yield "autograd", replace(p, options=replace(o, autograd=tuple(n for n in o.autograd if n != name)))
    # Global state of each repeat: everything, then per section, then per field.
    if any(c.context != Context() for s in p.sections for c in s.calls):
        yield "context", _map_calls(p, lambda k, j, c: replace(c, context=Context()))
        for k, s in enumerate(p.sections):
            if any(c.context != Context() for c in s.calls):
                yield "context", _map_calls(p, lambda kk, j, c, k=k: replace(c, context=Context()) if kk == k else c)
                for f in fields(Context):
                    if any(getattr(c.context, f.name) is not None for c in s.calls):
                        yield "context", _map_calls(
                            p, lambda kk, j, c, k=k, n=f.name: replace(c, context=replace(c.context, **{n: None}))
                            if kk == k else c)
    # Per-repeat module instances and call-site views.
    if any(c.frozen for s in p.sections for c in s.calls):
        yield "frozen", _map_calls(p, lambda k, j, c: replace(c, frozen=False))
    if any(c.view != "none" for s in p.sections for c in s.calls):
        yield "view", _map_calls(p, lambda k, j, c: replace(c, view="none"))
        for k, s in enumerate(p.sections):
            for j, c in enumerate(s.calls):
                if c.view != "none":
                    yield "view", _with_call(p, k, j, replace(c, view="none"))
    # Edge values: all at once, then one operand (or argument, or free value) at a time.
    yield from _edge_cuts(p)
    # Tensor attributes of the program inputs.
    for i, (name, spec) in enumerate(p.inputs):
        if spec.layout != "contiguous":
            yield "layout", _with_input(p, i, replace(spec, layout="contiguous"))
        if spec.requires_grad:
            yield "requires_grad", _with_input(p, i, replace(spec, requires_grad=False))
        if spec.dtype != "float32":
            yield "dtype", _with_input(p, i, replace(spec, dtype="float32"))
    # Shapes: every dim halved at once, then one axis (counted from the right,
    # as broadcasting aligns them) in every input where it matches the carried
    # input, then one dim of one input. Weights and shape literals follow.
    yield "shape", _reshape(p, {n: tuple(max(1, d // 2) for d in s.shape) for n, s in p.inputs})
    main = p.inputs[0][1].shape
    for axis in range(1, len(main) + 1):
        if main[-axis] > 1:
            yield "shape", _reshape(p, {n: _halve_axis(s.shape, axis, main[-axis]) for n, s in p.inputs})
    for name, spec in p.inputs:
        for axis in range(1, len(spec.shape) + 1):
            if spec.shape[-axis] > 1:
                yield "shape", _reshape(p, {name: _halve_axis(spec.shape, axis, spec.shape[-axis])})


# --- Python values and how repeats pass things ----------------------------------------


def _calls(p: Program) -> list[Call]:
    return [c for s in p.sections for c in s.calls]


def _set_names(p: Program) -> list[str]:
    """The free values some call rebinds, in order of first rebinding."""
    return list(dict.fromkeys(n for c in _calls(p) for n, _ in c.sets))


def _set_spread(p: Program) -> int:
    """How many rebindings give another value than the first repeat's."""
    calls = _calls(p)
    first = {n: typed_key(v) for n, v in calls[0].sets} if calls else {}
    return sum(n not in first or typed_key(v) != first[n] for c in calls for n, v in c.sets)


def _set_cuts(p: Program) -> Iterator[tuple[str, Optional[Program]]]:
    """Free values no longer rebound in the forward (all, then one at a
    time), then each rebound to the first repeat's value in every repeat."""
    names = _set_names(p)
    if len(names) > 1:
        yield "sets", _unset(p, set(names))
    for name in names:
        yield "sets", _unset(p, {name})
    first = dict(p.sections[0].calls[0].sets)
    for name in names:
        if name in first:
            yield "sets", _map_calls(p, lambda k, j, c, n=name: replace(
                c, sets=tuple((m, first[n] if m == n else v) for m, v in c.sets)))


def _unset(p: Program, names: set[str]) -> Program:
    """Free values ``names`` no longer rebound in any call: plain free values
    holding what the first repeat saw."""
    first = dict(p.sections[0].calls[0].sets)
    frees = tuple(replace(f, value=first[f.name]) if f.name in names and f.name in first else f for f in p.frees)
    p = replace(p, frees=frees)
    return _map_calls(p, lambda k, j, c: replace(c, sets=tuple((n, v) for n, v in c.sets if n not in names)))


def _form_cuts(p: Program) -> Iterator[tuple[str, Optional[Program]]]:
    """Write a repeat in the plain call-site form, and pass a subclass
    instance's value as the plain int or float it equals."""
    for k, s in enumerate(p.sections):
        for j, c in enumerate(s.calls):
            if c.how:
                yield "how", _with_call(p, k, j, replace(c, how=""))
            if any(isinstance(v, Sub) for v in (*c.args, *(v for _, v in c.sets))):
                yield "retype", _with_call(p, k, j, replace(
                    c, args=tuple(map(base_value, c.args)), sets=tuple((n, base_value(v)) for n, v in c.sets)))


def _spelling_cuts(p: Program) -> Iterator[tuple[str, Optional[Program]]]:
    """Every statement in its op's default spelling, then one at a time."""
    found = spelled(p)
    if len(found) > 1:
        q = p
        for name, i, _ in found:
            q = respelled(q, name, i, "")
        yield "spelling", q
    for name, i, _ in found:
        yield "spelling", respelled(p, name, i, "")


def _alias_cuts(p: Program) -> Iterator[tuple[str, Optional[Program]]]:
    """Every repeat passes its own extra input, then views of the primary
    become the primary itself; then the same one repeat at a time. The
    extra input's shape changes with it: shape literals follow (``_rederive``)."""
    if not any(c.alias for c in _calls(p)):
        return
    yield "alias", _rederive(_map_calls(p, lambda k, j, c: replace(c, alias="")))
    if any(c.alias == "view" for c in _calls(p)):
        yield "alias", _rederive(_map_calls(p, lambda k, j, c: replace(c, alias="same") if c.alias == "view" else c))
    for k, s in enumerate(p.sections):
        for j, c in enumerate(s.calls):
            if c.alias:
                yield "alias", _rederive(_with_call(p, k, j, replace(c, alias="")))
            if c.alias == "view":
                yield "alias", _rederive(_with_call(p, k, j, replace(c, alias="same")))


def _edge_slots(p: Program) -> dict[tuple[str, int, int], tuple[Value, ...]]:
    """The ordinary choices (``S.choices``) of every Python slot that also
    takes edge values, keyed (block name, statement index, operand index),
    for the primary's type in the first repeat that runs the statement
    (empty where the program does not type)."""
    sites = [(b, i, j, slot) for b in p.blocks() for i, stmt in enumerate(b.body) if stmt.op != CHILD
             for j, slot in enumerate(OPS[stmt.op].slots) if isinstance(slot, S) and slot.edges]
    if not sites:
        return {}
    primaries: dict[tuple[str, int], object] = {}
    try:
        call = p.sections[0].calls[0]
        env = env_of(call.context)
        todo = [(p.block, block_types(p, call, spec_type(p.inputs[0][1])))]
        seen = {""}
        while todo:
            b, scope = todo.pop()
            for i, stmt in enumerate(b.body):
                if stmt.op == CHILD:
                    name = stmt.operands[1].value
                    if name not in seen:
                        seen.add(name)
                        todo.append((p.sub(name), sub_scope(p, name, scope[stmt.operands[0].name], env)))
                    continue
                lead = next((o for slot, o in zip(OPS[stmt.op].slots, stmt.operands) if isinstance(slot, T)), None)
                if isinstance(lead, Ref) and lead.name in scope:
                    primaries[(b.name, i)] = scope[lead.name]
    except (Reject, ValueError, KeyError, IndexError, TypeError, RecursionError):
        return {}
    out = {}
    for b, i, j, slot in sites:
        if (b.name, i) in primaries:
            choices = slot.choices(primaries[(b.name, i)])
            if choices:
                out[(b.name, i, j)] = choices
    return out


def _is_edge(v: Value, choices: tuple[Value, ...]) -> bool:
    """Whether ``v`` is none of the slot's ordinary choices (compared as
    computations: -0.0 is not 0.0, True is not 1)."""
    return repr(typed_key(v)) not in {repr(typed_key(c)) for c in choices}


def _edge_reads(p: Program) -> list[tuple[tuple[str, int, int], Operand, tuple[Value, ...]]]:
    """(site, operand, choices) for every literal in an edge-taking slot and
    for the first such slot that reads each argument or free value."""
    out, seen = [], set()
    for site, choices in _edge_slots(p).items():
        name, i, j = site
        o = p.block_named(name).body[i].operands[j]
        if isinstance(o, Const) or o not in seen:
            seen.add(o)
            out.append((site, o, choices))
    return out


def _edge_values(p: Program, o: Operand) -> list[Value]:
    """Every value operand ``o`` takes: the literal, each repeat's argument,
    or the free value and each repeat's rebinding of it."""
    if isinstance(o, Const):
        return [o.value]
    if isinstance(o, Arg) and o.name in p.block.args:
        j = p.block.args.index(o.name)
        return [c.args[j] for c in _calls(p) if j < len(c.args)]
    if isinstance(o, Free):
        held = [f.value for f in p.frees if f.name == o.name]
        return held + [v for c in _calls(p) for n, v in c.sets if n == o.name]
    return []


def _edge_count(p: Program) -> int:
    """How many edge values the program holds (see ``_edge_reads``)."""
    return sum(_is_edge(v, choices) for _, o, choices in _edge_reads(p) for v in _edge_values(p, o))


def _edge_cuts(p: Program) -> Iterator[tuple[str, Optional[Program]]]:
    """Every edge value replaced by its slot's first ordinary choice, then
    one operand, argument or free value at a time."""
    reads = [r for r in _edge_reads(p) if any(_is_edge(v, r[2]) for v in _edge_values(p, r[1]))]
    if len(reads) > 1:
        q = p
        for site, o, choices in reads:  # statements keep their places: every site stays valid
            q = _unedge(q, site, o, choices)
        yield "edge_value", q
    for site, o, choices in reads:
        yield "edge_value", _unedge(p, site, o, choices)


def _unedge(p: Program, site: tuple[str, int, int], o: Operand, choices: tuple[Value, ...]) -> Program:
    """Operand ``o`` (read at ``site``) with its edge values replaced by ``choices[0]``."""

    def plain(v: Value) -> Value:
        return choices[0] if _is_edge(v, choices) else v

    if isinstance(o, Const):
        name, i, j = site
        b = p.block_named(name)
        stmt = b.body[i]
        stmt = replace(stmt, operands=stmt.operands[:j] + (Const(plain(o.value)),) + stmt.operands[j + 1:])
        return with_block(p, replace(b, body=b.body[:i] + (stmt,) + b.body[i + 1:]))
    if isinstance(o, Arg):
        j = p.block.args.index(o.name)
        return _map_calls(p, lambda k, i, c: replace(c, args=c.args[:j] + (plain(c.args[j]),) + c.args[j + 1:]))
    p = replace(p, frees=tuple(replace(f, value=plain(f.value)) if f.name == o.name else f for f in p.frees))
    return _map_calls(p, lambda k, i, c: replace(
        c, sets=tuple((n, plain(v) if n == o.name else v) for n, v in c.sets)))


# --- the block hierarchy -----------------------------------------------------------


def _body_cuts(p: Program, b: Block) -> Iterator[tuple[str, Optional[Program]]]:
    """Cuts inside one block's body (the layer's or a sub-block's); what a cut
    leaves unread (weights, free values, inputs, calls of sub-blocks) goes too."""

    def put(block: Block) -> Program:
        return _tidy(with_block(p, block)) if not b.name else with_block(p, _tidy_sub(block))

    outs = [s.out for s in b.body]
    for name in outs:
        if name != b.result:
            yield "earlier_result", put(_prune(replace(b, result=name), False))
            yield "earlier_result", put(_prune(replace(b, result=name), True))
    yield "dead_code", put(_prune(b, False))
    yield "dead_code", put(_prune(b, True))
    for i, stmt in enumerate(b.body):
        for operand in dict.fromkeys(o.name for o in stmt.operands if isinstance(o, Ref)):
            if stmt.out == b.result and operand not in outs:
                continue  # a block returns a value it computed, not an input or weight
            yield "bypass_statement", put(_bypass(b, i, operand))


def _hierarchy_cuts(p: Program) -> Iterator[tuple[str, Optional[Program]]]:
    """Every sub-block inlined everywhere (a flat program), one sub-block
    flattened into all its callers, one call of a sub-block dropped (its
    readers read its input) or inlined into its caller: sorted so that the
    cut that leaves the smallest program comes first."""
    if not p.subs:
        return
    cuts: list[tuple[str, Optional[Program]]] = [("flatten_all", _flatten_all(p))]
    cuts += [("flatten_block", _flatten(p, sb.name)) for sb in p.subs]
    for parent in p.blocks():
        outs = [s.out for s in parent.body]
        for i, stmt in enumerate(parent.body):
            if stmt.op != CHILD:
                continue
            x = stmt.operands[0].name
            if not (stmt.out == parent.result and x not in outs):  # a block does not return its input
                cuts.append(("drop_block", with_block(p, _bypass(parent, i, x))))
            cuts.append(("inline_block", _inline(p, parent.name, {i})))
            cuts += [("redirect_call", _redirect(p, parent, i, sb)) for sb in p.subs
                     if sb.name != stmt.operands[1].value and sb.name != parent.name]
        cuts.append(("hoist_block", _hoist(p, parent)))

    def rank(cut: tuple[str, Optional[Program]]) -> int:
        try:
            return size(_reachable(cut[1])) if cut[1] is not None else 0
        except (ValueError, KeyError, IndexError, TypeError):
            return 0  # check turns it down soon enough

    yield from sorted(cuts, key=rank)  # stable: ties keep the order above


def _hoist(p: Program, parent: Block) -> Optional[Program]:
    """A block whose body only returns a child's call on its input becomes
    that child: the child's body, weights, children and decorator move up a
    level (a decorated layer calling decorated children, one block fewer)."""
    if len(parent.body) != 1 or parent.body[0].op != CHILD or parent.result != parent.body[0].out:
        return None
    x, name, _ = parent.body[0].operands
    child = p.sub(name.value)
    if x != Ref(parent.inputs[0]) or child.inputs[0] != parent.inputs[0]:
        return None
    if child.kind == "module" and parent.kind == "function" and parent.name:
        return None  # a function sub-block owns no weights or module children
    up = replace(parent, body=child.body, result=child.result, weights=child.weights,
                 compile_region=child.compile_region, reuse=child.reuse, holder=child.holder)
    return _reachable(with_block(p, up))


def _redirect(p: Program, parent: Block, i: int, target: Block) -> Optional[Program]:
    """The ``i``-th statement of ``parent`` calls ``target`` instead of the
    sub-block it called: two sub-blocks become one where the failure needs
    only a second call, not a second body (check rejects a cycle or a type
    the call site cannot take)."""
    if parent.kind == "function" and target.kind == "module":
        return None
    stmt = parent.body[i]
    slots = [k for n, k in parent.children() if n == target.name]
    slot = 0 if target.kind == "function" else max(slots, default=-1) + 1
    call = Stmt(stmt.out, CHILD, (stmt.operands[0], Const(target.name), Const(slot)))
    return _reachable(with_block(p, replace(parent, body=parent.body[:i] + (call,) + parent.body[i + 1:])))


def _reachable(p: Program) -> Program:
    """``p`` without the sub-blocks no block calls any more."""
    subs = called(p.block, p.subs)
    return p if len(subs) == len(p.subs) else replace(p, subs=subs)


def _tidy_sub(b: Block) -> Block:
    """A sub-block without the weights its body no longer reads."""
    used = _used(b)
    return replace(b, weights=tuple(w for w in b.weights if w[0] in used))


def _names(p: Program, b: Block) -> set[str]:
    """Every name declared in ``b`` (and, for the layer, the free values)."""
    names = {*b.inputs, *(n for n, _ in (*b.weights, *b.buffers)), *b.args, *(s.out for s in b.body)}
    return names | ({f.name for f in p.frees} if not b.name else set())


def _inline(p: Program, parent_name: str, sites: Optional[set[int]] = None) -> Optional[Program]:
    """The sub-block calls at statement indices ``sites`` of block
    ``parent_name`` (every call when None) replaced by the callee's body:
    the callee's values get fresh names in the parent (its result takes the
    call's name, so later readers need no change), a module callee's weights
    move into the parent (one copy per instance slot), and the callee's own
    children are called from the parent (module children on fresh slots).
    None where a function block would have to own weights."""
    parent = p.block_named(parent_name)
    sites = {i for i, s in enumerate(parent.body) if s.op == CHILD} if sites is None else sites
    if not sites:
        return None
    taken = _names(p, parent)
    slots_used: dict[str, set[int]] = {}
    for name, slot in parent.children():
        slots_used.setdefault(name, set()).add(slot)

    def fresh(base: str) -> str:
        name, k = base, 1
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        taken.add(name)
        return name

    weights = list(parent.weights)
    moved: dict[tuple[str, int], dict[str, str]] = {}  # (callee, slot) -> callee weight -> parent weight
    reslot: dict[tuple[str, int, str, int], int] = {}  # (callee, slot, grandchild, its slot) -> parent slot
    body: list[Stmt] = []
    for i, stmt in enumerate(parent.body):
        if i not in sites or stmt.op != CHILD:
            body.append(stmt)
            continue
        x, name, slot = stmt.operands[0].name, stmt.operands[1].value, stmt.operands[2].value
        child = p.sub(name)
        if child.weights and parent.kind != "module":
            return None
        if (name, slot) not in moved:
            moved[(name, slot)] = {w: fresh(f"{name}_{w}") for w, _ in child.weights}
            weights += [(moved[(name, slot)][w], spec) for w, spec in child.weights]
        rename = {child.inputs[0]: x, **moved[(name, slot)]}
        for cs in child.body:
            rename[cs.out] = stmt.out if cs.out == child.result else fresh(f"{name}_{cs.out}")
        for cs in child.body:
            operands = tuple(Ref(rename[o.name]) if isinstance(o, Ref) else o for o in cs.operands)
            if cs.op == CHILD:
                g, gslot = operands[1].value, operands[2].value
                if p.sub(g).kind == "module":
                    key = (name, slot, g, gslot)
                    if key not in reslot:
                        used = slots_used.setdefault(g, set())
                        reslot[key] = min(k for k in range(len(used) + 1) if k not in used)
                        used.add(reslot[key])
                    operands = (operands[0], operands[1], Const(reslot[key]))
            body.append(replace(cs, out=rename[cs.out], operands=operands))
    return with_block(p, replace(parent, body=tuple(body), weights=tuple(weights)))


def _flatten(p: Program, name: str) -> Optional[Program]:
    """Every call of sub-block ``name``, in every block, inlined; the
    sub-block itself goes (``_reachable``)."""
    for parent in p.blocks():
        sites = {i for i, s in enumerate(parent.body) if s.op == CHILD and s.operands[1].value == name}
        if sites:
            p = _inline(p, parent.name, sites)
            if p is None:
                return None
    return _reachable(p)


def _flatten_all(p: Program) -> Optional[Program]:
    """Every sub-block call inlined, level by level: a flat program."""
    for _ in range(len(p.subs) * 4 + 4):  # each round inlines the layer's calls; bounded anyway
        if not any(s.op == CHILD for s in p.block.body):
            return _reachable(p)
        p = _inline(p, "")
        if p is None:
            return None
    return None


# --- helpers ------------------------------------------------------------------------


def _count_loops(p: Program) -> Program:
    """A loop over values left with nothing to iterate over (its args or the
    differences between its calls cut) counts instead, as the strategy does."""
    sections = tuple(
        replace(s, structure="for_range")
        if s.structure in ("for_values", "for_tuple") and not has_columns(p, s) else s
        for s in p.sections
    )
    return p if sections == p.sections else replace(p, sections=sections)


def _with_section(p: Program, k: int, s: Section) -> Program:
    return replace(p, sections=p.sections[:k] + (s,) + p.sections[k + 1:])


def _map_calls(p: Program, f) -> Program:
    return replace(p, sections=tuple(
        replace(s, calls=tuple(f(k, j, c) for j, c in enumerate(s.calls))) for k, s in enumerate(p.sections)
    ))


def _with_input(p: Program, i: int, spec: TensorSpec) -> Program:
    return replace(p, inputs=p.inputs[:i] + ((p.inputs[i][0], spec),) + p.inputs[i + 1:])


def _refs(stmt: Stmt) -> list[str]:
    return [o.name for o in stmt.operands if isinstance(o, Ref)]


def _prune(b: Block, keep_effects: bool) -> Block:
    """``b`` without the statements its result does not read; with
    ``keep_effects`` also keeping those that write an input or a buffer."""
    if keep_effects:
        live = live_values(b)
    else:
        live = {b.result}
        for stmt in reversed(b.body):
            if stmt.out in live:
                live.update(_refs(stmt))
    return replace(b, body=tuple(s for s in b.body if s.out in live))


def _bypass(b: Block, i: int, operand: str) -> Block:
    """``b`` without statement ``i``: whatever read its output reads ``operand``."""
    gone = b.body[i].out

    def rewire(o: Operand) -> Operand:
        return Ref(operand) if o == Ref(gone) else o

    body = b.body[:i] + tuple(replace(s, operands=tuple(map(rewire, s.operands))) for s in b.body[i + 1:])
    return replace(b, body=body, result=operand if b.result == gone else b.result)


def _used(b: Block) -> set[str]:
    return {o.name for s in b.body for o in s.operands if isinstance(o, (Ref, Free))}


def _tidy(p: Program) -> Program:
    """Drop what the body no longer reads: free values (``check`` requires
    every declared one to be read) and their rebindings, weights, buffers and
    extra block inputs, with what passed them: their packing, an alias of a
    first extra input that went, a write to an input the block no longer uses."""
    b = p.block
    used = _used(b)
    inputs = b.inputs[:1] + tuple(n for n in b.inputs[1:] if n in used)
    block = replace(
        b,
        inputs=inputs,
        weights=tuple(w for w in b.weights if w[0] in used),
        buffers=tuple(w for w in b.buffers if w[0] in used),
        extras=b.extras if len(inputs) > 1 else "positional",
    )
    frees = tuple(f for f in p.frees if f.name in used)
    first_kept = inputs[1:2] == b.inputs[1:2]
    live = live_values(block)

    def tidy_call(c: Call) -> Call:
        return replace(c, sets=tuple((n, v) for n, v in c.sets if n in used), alias=c.alias if first_kept else "")

    sections = tuple(
        replace(s, calls=tuple(map(tidy_call, s.calls)),
                write=s.write if s.write is None or (s.write[0] in inputs[1:] and s.write[0] in live) else None)
        for s in p.sections
    )
    return replace(p, block=block, frees=frees, sections=sections)


def _substitute(b: Block, f) -> Block:
    return replace(b, body=tuple(replace(s, operands=tuple(map(f, s.operands))) for s in b.body))


def _drop_arg(p: Program, j: int, name: str) -> Program:
    """Argument ``name`` removed; the body reads the first repeat's value."""
    first = p.sections[0].calls[0].args[j]
    block = _substitute(p.block, lambda o: Const(first) if o == Arg(name) else o)
    args = block.args[:j] + block.args[j + 1:]
    block = replace(block, args=args, pack=block.pack if args else "")
    p = replace(p, block=block)
    return _map_calls(p, lambda k, i, c: replace(c, args=c.args[:j] + c.args[j + 1:]))


def _inline_frees(p: Program, names: set[str]) -> Program:
    """Free values ``names`` become literals of what the first repeat reads
    (its rebinding, for a value rebound in the forward)."""
    values = {f.name: f.value for f in p.frees} | dict(p.sections[0].calls[0].sets)
    block = _substitute(p.block, lambda o: Const(values[o.name]) if isinstance(o, Free) and o.name in names else o)
    p = replace(p, block=block, frees=tuple(f for f in p.frees if f.name not in names))
    return _map_calls(p, lambda k, j, c: replace(c, sets=tuple((n, v) for n, v in c.sets if n not in names)))


def _drop_input(p: Program, name: str) -> Optional[Program]:
    """Program input ``name`` removed, with its mark_dynamic; None if read."""
    if name in p.block.inputs or any(c.tensor == name for s in p.sections for c in s.calls):
        return None
    marks = tuple(m for m in p.options.mark_dynamic if m[0] != name)
    return replace(p, inputs=tuple(x for x in p.inputs if x[0] != name),
                   options=replace(p.options, mark_dynamic=marks))


def _halve_axis(shape: tuple[int, ...], axis: int, size_: int) -> tuple[int, ...]:
    """``shape`` with dim ``-axis`` halved if it has size ``size_``."""
    if axis > len(shape) or shape[-axis] != size_ or size_ < 2:
        return shape
    out = list(shape)
    out[-axis] = size_ // 2
    return tuple(out)


def _reshape(p: Program, shapes: dict[str, tuple[int, ...]]) -> Optional[Program]:
    """New input shapes; weight shapes and shape literals re-derived from them."""
    inputs = tuple((n, replace(s, shape=shapes.get(n, s.shape))) for n, s in p.inputs)
    if inputs == p.inputs:
        return None
    new = dict(inputs)  # a dim halved to 1 can no longer be marked dynamic
    marks = tuple((n, d, strict) for n, d, strict in p.options.mark_dynamic
                  if d < len(new[n].shape) and new[n].shape[d] >= 2)
    return _rederive(replace(p, inputs=inputs, options=replace(p.options, mark_dynamic=marks)))


def _rederive(p: Program) -> Program:
    """Recompute what follows from the primary's shape: each weight's and
    buffer's shape (``W`` slots) and each shape literal (``D`` slots), typing
    the first repeat, in the layer and in every sub-block it calls (typed at
    its first call). Where the body no longer types, the inputs alone
    change, so that ``check`` turns the proposal down (and counts it)."""
    b = p.block
    specs = dict(p.inputs)
    call = p.sections[0].calls[0]
    subs = {sb.name: sb for sb in p.subs}
    done: dict[str, Block] = {}

    def derive(blk: Block, scope: dict, row: dict, env) -> tuple[Block, dict]:
        state = dict((*blk.weights, *blk.buffers))
        scope = {**scope, **{n: spec_type(s) for n, s in state.items()}}
        body = []
        for stmt in blk.body:
            if stmt.op == CHILD:
                name = stmt.operands[1].value
                child = done.get(name, subs[name])
                child, inner = derive(child, {child.inputs[0]: scope[stmt.operands[0].name]}, {}, env)
                if name not in done:
                    done[name] = child  # typed at its first call; check types the others
                scope[stmt.out] = inner[child.result]
                body.append(stmt)
                continue
            op = OPS[stmt.op]
            operands = list(stmt.operands)
            lead = None
            for i, (slot, operand) in enumerate(zip(op.slots, operands)):
                if isinstance(slot, T) and lead is None:
                    lead = scope[operand.name].shape
                elif isinstance(slot, W):
                    state[operand.name] = replace(state[operand.name], shape=tuple(slot.shape(lead)))
                    scope[operand.name] = spec_type(state[operand.name])
                elif isinstance(slot, D) and isinstance(operand, Const):
                    operands[i] = Const(slot.value(lead))
            stmt = replace(stmt, operands=tuple(operands))
            scope[stmt.out] = stmt_type(op, stmt, scope, row, env)
            body.append(stmt)
        block = replace(
            blk,
            body=tuple(body),
            weights=tuple((n, state[n]) for n, _ in blk.weights),
            buffers=tuple((n, state[n]) for n, _ in blk.buffers),
        )
        return block, scope

    try:
        carried = spec_type(specs[p.inputs[0][0]])
        primary = carried if call.tensor is None else CALL_VIEWS[call.view][1](spec_type(specs[call.tensor]))
        scope = {b.inputs[0]: primary, **{n: spec_type(specs[n]) for n in b.inputs[1:]}}
        if call.alias:
            scope[b.inputs[1]] = alias_type(call.alias, primary)
        row = {f.name: f.value for f in p.frees} | dict(call.sets) | dict(zip(b.args, call.args))
        block, _ = derive(b, scope, row, env_of(call.context))
    except (Reject, KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, RecursionError):
        return p
    return replace(p, block=block, subs=tuple(done.get(sb.name, sb) for sb in p.subs))
