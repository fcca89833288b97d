"""Mutation operators over the program IR: a corpus program that reached
something new in torch is changed a little, so the next program starts where
that one got to instead of from the plain draw.

Each operator is one catalogue entry (``OPERATORS``): a function of the
program, a ``random.Random`` and another corpus program (``splice`` reads
it), returning a changed program or None where it does not apply. Every
result goes through the IR's own check (``generators.check``): a mutant that
fails it is never run, and one that equals its parent is no mutant. Nothing
here imports torch.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, fields, replace
from typing import Callable, Optional

from .inputs import TAKES, TAKES_LIST
from .returns import RETURNS, SINGLE, returning
from .settings import SETTINGS
from .autograd import FEATURES as AUTOGRAD
from .check import check, checked, fitting_autograd, suits
from .forms import FORMS_LIST, applies
from .ir import (CHILD, EXTRAS, FLOWS, HOLDERS, SETTABLE, WRITES, Arg, Call, Const, Context, Free, FreeVar, Program,
                 Ref, Section, Stmt, TensorSpec, respelled, taking, with_block, with_call)
from .ops import OPS, UNDRAWN, S, T
from .reduce import labeled_candidates
from .spellings import kinds_of
from .strategies import HAS_NESTED_COMPILE_REGION, STRUCTURES_BY_KIND, _fix_loops
from .values import FLOATS, PyList, Sub, equal_values

Mutator = Callable[[Program, random.Random, Optional[Program]], Optional[Program]]
# The edge values a changed number is drawn from besides its equals of other types.
EDGE_NUMBERS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, float("inf"), float("-inf"), float("nan"), 1e-40, 1e20, 3, 0, -1,
                2**31, 2**40, True, False)
CUTS_SAMPLED = 12  # reducer candidates looked at by one ``cut``


@dataclass(frozen=True)
class Operator:
    name: str
    apply: Mutator
    doc: str


# -- helpers ------------------------------------------------------------------------


def _sections_with(p: Program, k: int, s: Section) -> Program:
    return replace(p, sections=p.sections[:k] + (s,) + p.sections[k + 1:])


def _pick_call(p: Program, rng: random.Random) -> tuple[int, int]:
    k = rng.randrange(len(p.sections))
    return k, rng.randrange(len(p.sections[k].calls))


def _with_calls(p: Program, k: int, calls: tuple[Call, ...]) -> Program:
    return _sections_with(p, k, replace(p.sections[k], calls=calls))


def _other_number(v, rng: random.Random):
    """Another value of a number's kind: an equal one of another type, an
    edge value, or a nearby one."""
    choices = list(equal_values(v)) + [e for e in EDGE_NUMBERS if type(e) is type(v) or isinstance(v, float)]
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
        choices += [v + 1, -v, v * 2]
    choices = [c for c in choices if repr(c) != repr(v) or type(c) is not type(v)]
    return rng.choice(choices) if choices else None


def _other_value(v, rng: random.Random):
    if isinstance(v, (bool, int, float)):
        return _other_number(v, rng)
    alternatives = equal_values(v)
    if isinstance(v, Sub):
        return v.value
    if isinstance(v, (tuple, PyList)) and alternatives:
        return rng.choice(alternatives)
    return None


# -- operators ----------------------------------------------------------------------


def cut(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Delete something: a statement, a block, a repeat, a call difference
    (one of the reducer's own cuts, drawn)."""
    found = list(itertools.islice(labeled_candidates(p), CUTS_SAMPLED))
    return rng.choice(found)[1] if found else None


def duplicate_call(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Repeat a call once more, right after itself: one more identical region."""
    k, i = _pick_call(p, rng)
    calls = p.sections[k].calls
    return _with_calls(p, k, calls[:i + 1] + (calls[i],) + calls[i + 1:])


def vary_call(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Insert a copy of a call that differs in one way: its ambient state, a
    Python argument, its call-site form, frozen parameters, an alias."""
    k, i = _pick_call(p, rng)
    calls = p.sections[k].calls
    changed = _changed_call(p, calls[i], rng)
    return None if changed is None else _with_calls(p, k, calls[:i + 1] + (changed,) + calls[i + 1:])


def change_call(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Change one call in place in one way (see ``vary_call``)."""
    k, i = _pick_call(p, rng)
    changed = _changed_call(p, p.sections[k].calls[i], rng)
    return None if changed is None else with_call(p, k, i, changed)


def _changed_call(p: Program, call: Call, rng: random.Random) -> Optional[Call]:
    what = rng.choice(("context", "arg", "arg", "how", "frozen", "alias", "set", "view"))
    if what == "context":
        field = rng.choice([f.name for f in fields(Context)])
        values = {"grad": (False, True, None), "autocast": (True, False, None), "inference": (True, False, None),
                  "default_dtype": ("float64", "float32", None)}[field]
        return replace(call, context=replace(call.context, **{field: rng.choice(values)}))
    if what == "arg" and call.args:
        j = rng.randrange(len(call.args))
        new = _other_value(call.args[j], rng)
        return None if new is None else replace(call, args=call.args[:j] + (new,) + call.args[j + 1:])
    if what == "how":
        b = p.block
        names = [f.name for f in FORMS_LIST if applies(f, b.kind, len(b.args), not (b.pack or b.attrs))]
        return replace(call, how=rng.choice(names + [""])) if names else None
    if what == "frozen":
        return replace(call, frozen=not call.frozen)
    if what == "alias":
        return replace(call, alias=rng.choice(("", "same", "view")))
    if what == "view":
        return replace(call, view=rng.choice(("none", "transpose", "narrow", "contiguous")))
    if what == "set":
        settable = [f for f in p.frees if f.home in SETTABLE]
        if not settable:
            return None
        f = rng.choice(settable)
        current = dict(call.sets).get(f.name, f.value)
        new = _other_value(current, rng)
        if new is None:
            return None
        return replace(call, sets=tuple((n, v) for n, v in call.sets if n != f.name) + ((f.name, new),))
    return None


def change_value(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Change a literal in a block body, a free value's binding or a call's
    argument to another of its kind (edge values and equal values of other
    types included)."""
    sites = [("free", j) for j, f in enumerate(p.frees)]
    sites += [("const", b.name, s, o) for b in p.blocks() for s, stmt in enumerate(b.body) if stmt.op != CHILD
              for o, operand in enumerate(stmt.operands) if isinstance(operand, Const)
              and isinstance(operand.value, (bool, int, float))]
    calls = [(k, i) for k, s in enumerate(p.sections) for i, c in enumerate(s.calls) if c.args]
    if calls and (not sites or rng.random() < 0.5):  # a per-call argument
        k, i = rng.choice(calls)
        call = p.sections[k].calls[i]
        j = rng.randrange(len(call.args))
        new = _other_value(call.args[j], rng)
        return None if new is None else with_call(p, k, i, replace(call, args=call.args[:j] + (new,) + call.args[j + 1:]))
    if not sites:
        return None
    site = rng.choice(sites)
    if site[0] == "free":
        f = p.frees[site[1]]
        new = _other_value(f.value, rng)
        if new is None:
            return None
        frees = p.frees[:site[1]] + (FreeVar(f.name, new, f.home),) + p.frees[site[1] + 1:]
        return replace(p, frees=frees)
    _, name, s, o = site
    b = p.block_named(name)
    stmt = b.body[s]
    new = _other_number(stmt.operands[o].value, rng)
    if new is None:
        return None
    stmt = replace(stmt, operands=stmt.operands[:o] + (Const(new),) + stmt.operands[o + 1:])
    return with_block(p, replace(b, body=b.body[:s] + (stmt,) + b.body[s + 1:]))


def free_value(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Make a literal or a per-call argument read in the layer block a free
    value read at run time (a global, a closure cell, a class attribute, a
    default argument, a field of a dataclass or a namespace), rebound before
    every repeat where the argument's values differ (and maybe where they do
    not): what Dynamo must guard, or see stored, to read it right."""
    from .ir import HOMES

    b = p.block
    sites = [(s, o) for s, stmt in enumerate(b.body) if stmt.op != CHILD for o, operand in enumerate(stmt.operands)
             if (isinstance(operand, Const) and isinstance(operand.value, (bool, int, float)))
             or isinstance(operand, Arg)]
    if not sites:
        return None
    s, o = rng.choice(sites)
    operand = b.body[s].operands[o]
    calls = [c for sec in p.sections for c in sec.calls]
    # an argument's value per repeat (its first repeat's is the binding); a literal's is the same in all
    values = [c.args[b.args.index(operand.name)] for c in calls] if isinstance(operand, Arg) else [operand.value] * len(calls)
    taken = {f.name for f in p.frees}
    name = next(f"p{k}" for k in range(100) if f"p{k}" not in taken)
    home = rng.choice(SETTABLE if len({repr(v) for v in values}) > 1 else HOMES)  # differing values: rebound
    stmt = replace(b.body[s], operands=b.body[s].operands[:o] + (Free(name),) + b.body[s].operands[o + 1:])
    p = replace(p, block=replace(b, body=b.body[:s] + (stmt,) + b.body[s + 1:]),
                frees=p.frees + (FreeVar(name, values[0], home),))
    if home in SETTABLE and (len({repr(v) for v in values}) > 1 or rng.random() < 0.6):
        if len({repr(v) for v in values}) == 1:  # rebound in the forward, before every repeat, to another value
            # half the time one plainly different (a stale read must show), else any other of its kind
            v = values[0]
            plain = v * 2 + 1 if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None
            changed = plain if plain is not None and rng.random() < 0.5 else _other_value(v, rng)
            values = [changed if i % 2 and changed is not None else v for i, v in enumerate(values)]
        rows = iter(values)
        p = replace(p, sections=tuple(replace(sec, calls=tuple(replace(c, sets=c.sets + ((name, next(rows)),))
                                                               for c in sec.calls)) for sec in p.sections))
    return p


def swap_op(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Swap a statement's op for another of the same category and arity."""
    sites = [(b, s) for b in p.blocks() for s, stmt in enumerate(b.body) if stmt.op != CHILD and stmt.op in OPS]
    if not sites:
        return None
    b, s = rng.choice(sites)
    stmt = b.body[s]
    op = OPS[stmt.op]
    alike = [o.name for o in OPS.values() if o.category == op.category and o.name != op.name
             and len(o.slots) == len(op.slots) and o.inplace == op.inplace]
    if not alike:
        return None
    stmt = replace(stmt, op=rng.choice(alike), spelling="")  # a spelling is its op's own
    return with_block(p, replace(b, body=b.body[:s] + (stmt,) + b.body[s + 1:]))


def respell(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Write a statement in another spelling of its op (generators.spellings:
    a method, a module, an aten overload, in place, ``out=``...), or its
    default again: the same computation, another node for the backend."""
    sites = [(b.name, i, stmt) for b in p.blocks() for i, stmt in enumerate(b.body) if kinds_of(stmt.op)]
    if not sites:
        return None
    name, i, stmt = rng.choice(sites)
    return respelled(p, name, i, rng.choice([k for k in ("", *kinds_of(stmt.op)) if k != stmt.spelling]))


def repeat_stmt(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Run a statement (a sub-block call most of all) twice in a row, the
    second on the first's output: a block inserted where one already fits."""
    sites = [(b, s) for b in p.blocks() for s, stmt in enumerate(b.body)
             if stmt.operands and isinstance(stmt.operands[0], Ref) and not (stmt.op in OPS and OPS[stmt.op].inplace)]
    children = [(b, s) for b, s in sites if b.body[s].op == CHILD]
    if not sites:
        return None
    b, s = rng.choice(children if children and rng.random() < 0.7 else sites)
    stmt = b.body[s]
    used = {int(x.out[1:]) for blk in p.blocks() for x in blk.body if x.out[1:].isdigit()}
    new = f"v{max(used, default=-1) + 1}"
    again = replace(stmt, out=new, operands=(Ref(stmt.out),) + stmt.operands[1:])

    def rewire(x: Stmt) -> Stmt:
        return replace(x, operands=tuple(Ref(new) if o == Ref(stmt.out) else o for o in x.operands))

    body = b.body[:s + 1] + (again,) + tuple(rewire(x) for x in b.body[s + 1:])
    return with_block(p, replace(b, body=body, result=new if b.result == stmt.out else b.result))


# Ops insert_stmt may write: tensor operands and Python values only (weights and
# derived operands are the draw's to build), none of the draw's own closers.
_INSERTABLE = tuple(o for o in OPS.values() if o.category not in UNDRAWN
                    and all(type(slot) in (T, S) for slot in o.slots))


def _fresh(p: Program) -> str:
    used = {int(x.out[1:]) for blk in p.blocks() for x in blk.body if x.out[1:].isdigit()}
    return f"v{max(used, default=-1) + 1}"


def _insert(p: Program, rng: random.Random, op, primary: Optional[str] = None) -> Optional[Program]:
    """``op`` inserted in the layer block on ``primary`` (or a value drawn
    from those in scope) at a drawn place, its Python operands drawn from the
    op's own choices; a later reader of the primary reads its result instead
    (the block's result adds an in-place op's result where nothing reads it:
    FX keeps reading the written input's node, so the write alone would be a
    node no region grown back from the outputs takes in)."""
    scope = check(p)[0]
    b = p.block
    first = 0 if primary is None or primary in b.inputs else next(
        k + 1 for k, x in enumerate(b.body) if x.out == primary)
    i = rng.randrange(first, len(b.body) + 1)
    names = [n for n in (*b.inputs, *(x.out for x in b.body[:i])) if n in scope]
    primary = primary or rng.choice(names)
    operands = []
    for k, slot in enumerate(op.slots):
        if type(slot) is T:
            operands.append(Ref(primary if k == 0 else rng.choice(names)))
        else:
            choices = slot.choices(scope[primary])
            if not choices:
                return None
            operands.append(Const(rng.choice(choices)))
    out = _fresh(p)
    body = b.body[:i] + (Stmt(out, op.name, tuple(operands)),) + b.body[i:]
    readers = [j for j in range(i + 1, len(body)) if Ref(primary) in body[j].operands]
    result = b.result
    if readers:
        j = rng.choice(readers)
        body = body[:j] + (replace(body[j], operands=tuple(Ref(out) if o == Ref(primary) else o
                                                            for o in body[j].operands)),) + body[j + 1:]
    elif result == primary:
        result = out
    elif op.inplace:  # read the write's result: a region grown from the outputs back takes the write in
        reader = _fresh(replace(p, block=replace(b, body=body)))
        body, result = body + (Stmt(reader, "add", (Ref(result), Ref(out))),), reader
    return replace(p, block=replace(b, body=body, result=result))


def insert_stmt(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Insert a statement in the layer block: an op on a value in scope (an
    in-place one two times in five)."""
    inplace = [o for o in _INSERTABLE if o.inplace]
    return _insert(p, rng, rng.choice(inplace if rng.random() < 0.4 else _INSERTABLE))


def write_input(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Make the block write one of its tensor inputs in place (a new program
    input, float32 without grad, if it has none that may be written): every
    repeat changes what the next one reads, and a region holding the write
    mutates its input."""
    b = p.block
    x = dict(p.inputs)[b.inputs[0]]
    writable = [n for n in b.inputs[1:] if not dict(p.inputs)[n].requires_grad]
    if writable and rng.random() < 0.7:
        name = rng.choice(writable)
    else:
        taken = {n for n, _ in p.inputs}
        name = next(f"y{k}" for k in range(100) if f"y{k}" not in taken)
        p = replace(p, inputs=p.inputs + ((name, TensorSpec(x.shape, "float32", False)),),
                    block=replace(b, inputs=b.inputs + (name,)))
    inplace = [o for o in _INSERTABLE if o.inplace]
    return _insert(p, rng, rng.choice(inplace), primary=name)


def toggle_region(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Mark a block ``nested_compile_region``, or take the mark away."""
    if not HAS_NESTED_COMPILE_REGION:
        return None
    b = rng.choice(p.blocks())
    return with_block(p, replace(b, compile_region=not b.compile_region, reuse=""))


def reshape_section(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Repeat a section another way: its loop shape, flow, keywords, interlude."""
    k = rng.randrange(len(p.sections))
    s = p.sections[k]
    what = rng.choice(("structure", "flow", "keywords", "interleave"))
    if what == "structure":
        s = replace(s, structure=rng.choice(STRUCTURES_BY_KIND[p.block.kind]))
        s = replace(s, outer=2 if s.structure == "nested" else 1)
    elif what == "flow":
        s = replace(s, flow=rng.choice(FLOWS))
    elif what == "keywords":
        s = replace(s, keywords=not s.keywords)
    else:
        from .interludes import INTERLUDES

        s = replace(s, interleave=rng.choice([None, *INTERLUDES]))
    return _fix_loops(_sections_with(p, k, s))


def write_between(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Write a program input in place after every call of a section (one of
    the writes eager allows there, drawn; where none is, a new input the
    layer adds to its result), or stop writing it."""
    k = rng.randrange(len(p.sections))
    s = p.sections[k]
    if s.write and rng.random() < 0.5:
        return _sections_with(p, k, replace(s, write=None))

    def writes(q: Program) -> list[Program]:
        return [w for w in (_sections_with(q, k, replace(s, write=(n, mode))) for n in q.block.inputs[1:]
                            for mode in WRITES) if checked(w) is not None]

    allowed = writes(p) or writes(_read_new_input(p))
    return rng.choice(allowed) if allowed else None


def _read_new_input(p: Program) -> Program:
    """``p`` with a new float32 input of the carried input's shape, which the
    layer adds to its result (cast to the result's dtype; unchecked)."""
    b = p.block
    taken = {n for n, _ in p.inputs}
    name = next(f"y{k}" for k in range(100) if f"y{k}" not in taken)
    out = _fresh(p)
    body = b.body + (Stmt(out, "merge_cast", (Ref(b.result), Ref(name))),)
    return replace(p, inputs=p.inputs + ((name, TensorSpec(p.inputs[0][1].shape, "float32", False)),),
                   block=replace(b, inputs=b.inputs + (name,), body=body, result=out))


def repack(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Pass the block's inputs or arguments another way: extra tensors packed
    in a container or passed by keyword, arguments in a dataclass or a
    module; module children held another way."""
    b = p.block
    what = rng.choice(("extras", "pack", "holder", "kind", "attrs"))
    if what == "extras":
        b = replace(b, extras=rng.choice(EXTRAS))
    elif what == "pack":
        b = replace(b, pack=rng.choice(("", "dataclass", "module")))
    elif what == "holder":
        b = replace(b, holder=rng.choice(HOLDERS))
    elif what == "attrs":  # Python arguments as per-instance attributes (closures of a factory for functions)
        b = replace(b, attrs=not b.attrs)
    else:
        b = replace(b, kind="module" if b.kind == "function" else "function")
        p = _fix_structures(p, b.kind)
    return replace(p, block=b)


def reshape_return(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Make a block return another shape of outputs (generators.returns): a
    container, its input, a view, a size, None, an output no caller reads."""
    b = rng.choice(p.blocks())
    return returning(p, b.name, rng.choice([k for k in (SINGLE, *RETURNS) if k != b.returns]))


def give(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Give a block one more argument (generators.inputs.TAKES), or take it
    away, or make one repeat pass another variant of it."""
    b = rng.choice(p.blocks())
    if b.name or not b.takes or rng.random() < 0.4:
        kinds = [t.name for t in TAKES_LIST if t.sub or not b.name]
        return taking(p, b.name, rng.choice([k for k in ("", *kinds) if k != b.takes]))
    k, i = _pick_call(p, rng)
    call = p.sections[k].calls[i]
    variants = [v for v, _ in TAKES[b.takes].variants if v != call.given]
    return with_call(p, k, i, replace(call, given=rng.choice(variants))) if variants else None


def hook(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Give the program an autograd feature (generators.autograd: a hook, saved-tensor hooks, another
    way of asking for gradients), or take one away, or swap one for another of its family."""
    have = list(p.options.autograd)
    fit = fitting_autograd(replace(p, options=replace(p.options, autograd=())))
    if have and (rng.random() < 0.3 or not fit):
        gone = rng.choice(have)
        have.remove(gone)
        if rng.random() < 0.5:  # its family's other entry in its place
            same = [n for n in fit if AUTOGRAD[n].family == AUTOGRAD[gone].family and n != gone]
            have += [rng.choice(same)] if same else []
    else:
        taken = {AUTOGRAD[n].family for n in have}
        fresh = [n for n in fit if AUTOGRAD[n].family not in taken]
        if not fresh:
            return None
        have.append(rng.choice(fresh))
    return replace(p, options=replace(p.options, autograd=tuple(have)))


def _fix_structures(p: Program, kind: str) -> Program:
    allowed = STRUCTURES_BY_KIND[kind]
    return replace(p, sections=tuple(s if s.structure in allowed else replace(s, structure="for_range", outer=1)
                                     for s in p.sections))


def compile_options(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Compile another way: fullgraph, dynamic shapes, a dynamic mark, under
    a torch setting (generators.settings: one added, or one taken away)."""
    o = p.options
    what = rng.choice(("fullgraph", "dynamic", "mark", "settings"))
    if what == "settings":
        taken = {SETTINGS[n].family for n in o.settings}
        fresh = [n for n in SETTINGS if SETTINGS[n].family not in taken and suits(n, p)]
        if o.settings and (not fresh or rng.random() < 0.5):
            gone = rng.choice(o.settings)
            o = replace(o, settings=tuple(n for n in o.settings if n != gone))
        else:
            o = replace(o, settings=(*o.settings, rng.choice(fresh)))
    elif what == "fullgraph":
        o = replace(o, fullgraph=not o.fullgraph)
    elif what == "dynamic":
        o = replace(o, dynamic=None if o.dynamic else True, mark_dynamic=())
    else:
        name, spec = p.inputs[0]
        o = replace(o, dynamic=None, mark_dynamic=() if o.mark_dynamic or not spec.shape else ((name, 0, False),))
    return replace(p, options=o)


def reseed(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """The same program on other input values (and changed input dtypes)."""
    if rng.random() < 0.5 or not p.inputs:
        return replace(p, seed=rng.randrange(2**16))
    i = rng.randrange(len(p.inputs))
    name, spec = p.inputs[i]
    spec = replace(spec, dtype=rng.choice(FLOATS)) if spec.dtype in FLOATS else replace(spec, requires_grad=not spec.requires_grad)
    return replace(p, inputs=p.inputs[:i] + ((name, spec),) + p.inputs[i + 1:])


def splice(p: Program, rng: random.Random, other: Optional[Program] = None) -> Optional[Program]:
    """Cross two corpus programs: this one's blocks with the other's way of
    calling them (loop shapes, flows, contexts, call-site forms, frozen
    instances, writes), or with its compile options."""
    if other is None:
        return None
    if rng.random() < 0.25:
        return replace(p, options=replace(other.options, door=""))
    sections = []
    for k, s in enumerate(p.sections):
        o = other.sections[k % len(other.sections)]
        calls = tuple(replace(c, context=o.calls[i % len(o.calls)].context, how=o.calls[i % len(o.calls)].how,
                              frozen=o.calls[i % len(o.calls)].frozen) for i, c in enumerate(s.calls))
        write = s.write if o.write is None or o.write[0] not in p.block.inputs else o.write
        sections.append(replace(s, structure=o.structure, flow=o.flow, outer=o.outer, interleave=o.interleave,
                                calls=calls, write=write))
    return _fix_loops(_fix_structures(replace(p, sections=tuple(sections)), p.block.kind))


def untrigger(p: Program, rng: random.Random, other=None) -> Optional[Program]:
    """Take away one feature a known issue needs (generators.without): a parent that met a known crash gets
    descendants that reach past it."""
    from .without import REMOVALS

    removals = list(REMOVALS.values())
    rng.shuffle(removals)
    return next((q for q in (f(p) for f in removals) if q is not None and q.to_json() != p.to_json()), None)


OPERATORS: dict[str, Operator] = {op.__name__: Operator(op.__name__, op, (op.__doc__ or "").split("\n")[0]) for op in (
    cut, duplicate_call, vary_call, change_call, change_value, free_value, swap_op, respell, repeat_stmt, insert_stmt,
    write_input, toggle_region, reshape_section, write_between, repack, reshape_return, give, hook, compile_options, reseed,
    splice, untrigger)}


def mutate(program: Program, operator: str, rng: random.Random, other: Optional[Program] = None) -> Optional[Program]:
    """``program`` changed by one operator, checked; None where the operator
    does not apply, its result fails the IR's check, or it changed nothing.
    A door is the campaign's to give, so it is taken away first."""
    base = replace(program, options=replace(program.options, door=""))
    try:
        mutant = OPERATORS[operator].apply(base, rng, other)
    except (ValueError, KeyError, IndexError, TypeError):  # a change too broken for check to name
        return None
    if mutant is None or mutant.to_json() == base.to_json():
        return None
    try:
        return checked(mutant)
    except (KeyError, IndexError, TypeError):
        return None
