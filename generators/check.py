"""Well-formedness: the checks that make a program valid by construction.

``check`` re-derives the static type of every value of every repeat from the IR
alone, and enforces the rules that keep eager execution valid (what may be
mutated in place, what autograd must still find unmodified, where inference
tensors may flow), so a program loaded from a file or hand-edited into a repro
is verified the same way the strategy built it. It raises ``MalformedProgram``
naming the offending part.
"""

from __future__ import annotations

import math

import functools
from dataclasses import fields, replace
from typing import Callable, Optional

from .interludes import INTERLUDES
from .ir import (
    BLOCK_KINDS,
    CHILD,
    ALIASES,
    EXTRAS,
    HOLDERS,
    REUSES,
    MAX_DEPTH,
    PACKS,
    SETTABLE,
    WRITES,
    Fn,
    DTYPES,
    FLOATS,
    FLOWS,
    HOMES,
    LAYOUTS,
    OUTPUT_STYLES,
    STRUCTURES,
    VIEWS,
    Arg,
    Block,
    Call,
    Const,
    Context,
    Free,
    MalformedProgram,
    Program,
    Ref,
    Section,
    Stmt,
    TensorSpec,
    Value,
    with_call,
)
from .forms import FORMS, applies
from .inputs import PACKS as EXTRA_PACKS, TAKES
from .returns import RETURNS, SINGLE, reads_second
from .settings import SETTINGS
from .autograd import FEATURES as AUTOGRAD, fits as autograd_fits
from .spellings import KEEPS, instance_name, spelling
from .opinfo import OPINFO, parts as opinfo_parts
from .values import PyList, Sub, base_value, typed_key
from .ops import CALL_VIEWS, OPS, TT, D, Env, OpSpec, Reject, S, T, W, accepts, broadcast, slot_values

# Structures where every repeat has its own module instance.
PER_INSTANCE = ("module_list", "calls")
AUTOCASTABLE = ("float32", "bfloat16", "float16")


def draws_random(program: Program) -> bool:
    """Whether the layer block draws random numbers (the op catalogue knows which ops do)."""
    return any(OPS[s.op].random for s in program.block.body if s.op in OPS)


def takes_tuple_element(program: Program) -> bool:
    """Whether a graph of the program holds a getitem of a multi-output node: an op taking one element of the
    tuple another returns (chunk, split, unbind), or a decorated block (an invoke_subgraph returns a tuple)."""
    return any(b.compile_region or any(OPS[s.op].element for s in b.body if s.op in OPS) for b in program.blocks())


def operand_value(operand, row: dict[str, Value]) -> Value:
    if isinstance(operand, Const):
        return operand.value
    if isinstance(operand, (Arg, Free)):
        if operand.name not in row:
            raise Reject(f"{operand.name!r} is not a block argument or free value")
        return row[operand.name]
    raise Reject(f"{operand!r} is not a Python-value operand")


def env_of(context: Context) -> Env:
    return Env(default_dtype=context.default_dtype or "float32", autocast=bool(context.autocast))


def spec_type(spec: TensorSpec) -> TT:
    return TT(spec.shape, spec.dtype, spec.layout == "contiguous")


SubTyper = Callable[[str, TT, Env], TT]


def _opinfo_type(stmt: Stmt, scope: dict[str, TT], env: Env) -> TT:
    """An OpInfo case's output has the type it recorded (harness.opinfo_db ran it eagerly); under
    autocast it might not, and a case is never drawn there."""
    try:
        refs, fmt, shape, dtype = opinfo_parts(stmt)
    except (ValueError, AttributeError, TypeError):
        raise Reject("an OpInfo case takes its tensors, its template, its output's shape and dtype") from None
    if env.autocast:
        raise Reject("an OpInfo case outside autocast only")
    missing = [r for r in refs if not isinstance(r, Ref) or r.name not in scope]
    if missing or not isinstance(fmt, str):
        raise Reject(f"OpInfo case: {missing} not tensors in scope")
    return TT(shape, dtype)


def stmt_type(op: OpSpec, stmt: Stmt, scope: dict[str, TT], row: dict[str, Value], env: Env,
              subs: Optional[SubTyper] = None) -> TT:
    """Static type of ``stmt``'s output for one repeat; raises Reject if invalid.
    ``subs`` types a call of a sub-block (the program's own blocks)."""
    if op.name == OPINFO:
        return _opinfo_type(stmt, scope, env)
    if len(stmt.operands) != len(op.slots):
        raise Reject(f"{op.name} takes {len(op.slots)} operands, got {len(stmt.operands)}")
    form = spelling(op.name, stmt.spelling)
    if stmt.spelling and form is None:
        raise Reject(f"{op.name} has no spelling {stmt.spelling!r} (generators.spellings)")
    if form is not None and form.kind == "module" and any(isinstance(o, (Arg, Free)) for o in stmt.operands):
        raise Reject(f"{op.name}: a module is built once, so its arguments are literals")
    if op.name == CHILD:
        x, name, _ = stmt.operands
        if not isinstance(x, Ref) or x.name not in scope:
            raise Reject(f"sub-block call: {x} is not a tensor in scope")
        if subs is None:
            raise Reject("a sub-block call outside a program")
        if scope[x.name].dtype not in FLOATS:
            raise Reject(f"sub-block {name.value!r} takes floating tensors, got {scope[x.name].dtype}")
        return subs(name.value, scope[x.name], env)
    tensors: list[TT] = []
    values: list[Value] = []
    has_weights = False
    for slot, operand in zip(op.slots, stmt.operands):
        if isinstance(slot, (T, W)):
            if not isinstance(operand, Ref) or operand.name not in scope:
                raise Reject(f"{op.name}: {operand} is not a tensor in scope")
            t = scope[operand.name]
            if isinstance(slot, W):
                has_weights = True
                if t.shape != slot.shape(tensors[0].shape):
                    raise Reject(f"{op.name}: weight {operand.name} has shape {t.shape}")
                continue
            if not tensors:
                if t.dtype not in op.dtypes:
                    raise Reject(f"{op.name} does not take {t.dtype}")
            else:
                if t.dtype not in slot.dtypes:
                    raise Reject(f"{op.name}: operand {operand.name} is {t.dtype}")
                if slot.relation == "same" and t.shape != tensors[0].shape:
                    raise Reject(f"{op.name}: operands must have equal shapes")
                if slot.relation == "broadcast" and broadcast(t.shape, tensors[0].shape) != tensors[0].shape:
                    raise Reject(f"{op.name}: {operand.name} does not broadcast to the primary")
            tensors.append(t)
        else:
            if isinstance(operand, Ref):
                raise Reject(f"{op.name}: Python-value slot got tensor {operand.name}")
            value = operand_value(operand, row)
            if isinstance(slot, S) and not accepts(slot, tensors[0], value):
                raise Reject(f"{op.name}: {value!r} not among {slot_values(slot, tensors[0])}")
            if isinstance(slot, D):
                if isinstance(operand, (Arg, Free)) or value != slot.value(tensors[0].shape):
                    raise Reject(f"{op.name}: derived operand must be {slot.value(tensors[0].shape)!r}")
            values.append(base_value(value))
    autocasting = op.autocast and env.autocast
    if has_weights:
        allowed = AUTOCASTABLE if autocasting else op.weight_dtypes
        if tensors[0].dtype not in allowed:
            raise Reject(f"{op.name}: {tensors[0].dtype} input next to float32 weights")
    if op.same_dtype:
        dtypes = {("bfloat16" if autocasting and t.dtype in AUTOCASTABLE else t.dtype) for t in tensors}
        if len(dtypes) > 1:
            raise Reject(f"{op.name}: operands must share a dtype, got {sorted(dtypes)}")
    out = op.rule(tensors, values, env)
    if form is not None and form.kind in KEEPS and (out.shape, out.dtype) != (tensors[0].shape, tensors[0].dtype):
        raise Reject(f"{op.name} spelled {form.kind} writes into a tensor of its primary's type, not {out.dtype}")
    if autocasting and tensors[0].dtype in AUTOCASTABLE:
        out = TT(out.shape, "bfloat16", out.contiguous)
    return out


def _enum(value, allowed, what: str) -> None:
    if value not in allowed:
        raise MalformedProgram(f"unknown {what} {value!r}")


def _check_shape_of_program(program: Program) -> None:
    b = program.block
    _enum(b.kind, BLOCK_KINDS, "block kind")
    _enum(program.outputs, OUTPUT_STYLES, "output style")
    if not program.sections:
        raise MalformedProgram("a program runs its block in at least one section")
    if len(program.interludes) != len(program.sections) - 1:
        raise MalformedProgram("one interlude slot between each pair of sections")
    for name in program.interludes:
        if name is not None:
            _enum(name, INTERLUDES, "interlude")
    for s in program.sections:
        _enum(s.structure, STRUCTURES, "repetition structure")
        _enum(s.flow, FLOWS, "data flow")
        if s.interleave is not None:
            _enum(s.interleave, INTERLUDES, "interlude")
        if not s.calls or s.outer < 1:
            raise MalformedProgram("a section repeats its block at least once")
        if s.outer > 1 and s.structure != "nested":
            raise MalformedProgram("only a nested loop has an outer trip count")
        if s.structure == "nested" and s.outer < 2:
            raise MalformedProgram("a nested loop runs its outer loop at least twice")
    names = [n for n, _ in program.inputs]
    if len(set(names)) != len(names) or not names:
        raise MalformedProgram(f"program inputs must be distinct and non-empty: {names}")
    for _, spec in (*program.inputs, *b.weights, *b.buffers):
        _enum(spec.dtype, DTYPES, "dtype")
        _enum(spec.layout, LAYOUTS, "layout")
        if any(d < (0 if spec.data is not None else 1) for d in spec.shape):  # OpInfo samples may be empty
            raise MalformedProgram(f"bad tensor shape {spec.shape}")
        if spec.data is not None and (len(spec.data) != math.prod(spec.shape) or spec.layout != "contiguous"):
            raise MalformedProgram(f"a tensor's values fill its shape {spec.shape}, contiguous")
        if spec.layout in ("transposed",) and len(spec.shape) < 2:
            raise MalformedProgram("a transposed input needs rank >= 2")
        if spec.layout != "contiguous" and not spec.shape:
            raise MalformedProgram("a 0-dim input is always contiguous")
        if spec.layout == "expanded" and spec.requires_grad:
            raise MalformedProgram("an expanded input cannot require grad")
    for name, spec in program.inputs:
        if spec.requires_grad and spec.dtype not in FLOATS:
            raise MalformedProgram(f"input {name}: only floating tensors require grad")
    block_names = [*b.inputs, *(n for n, _ in b.weights), *(n for n, _ in b.buffers), *b.args, *(s.out for s in b.body)]
    if len(set(block_names)) != len(block_names):
        raise MalformedProgram(f"duplicate names in block: {block_names}")
    if not b.inputs or any(n not in names for n in b.inputs[1:]):
        raise MalformedProgram("block inputs after the first must be program inputs")
    if names[0] in b.inputs[1:]:
        raise MalformedProgram("the carried input is passed as the primary, not as an extra")
    for stmt in b.body:
        if stmt.op not in OPS:
            raise MalformedProgram(f"unknown op {stmt.op!r}")
    if b.name:
        raise MalformedProgram("the layer block has no name; sub-blocks do")
    _check_subs(program)
    _check_frees(program, block_names)
    if b.attrs and any(s.structure not in PER_INSTANCE for s in program.sections):
        raise MalformedProgram("Python arguments can be instance attributes or closure cells only when every "
                               "repeat has its own instance")
    if b.attrs and b.kind == "function" and any(s.structure != "calls" for s in program.sections):
        raise MalformedProgram("function instances made by a factory are called one by one")
    _enum(b.extras, EXTRAS, "way of passing extra inputs")
    _enum(b.pack, PACKS, "way of passing Python arguments")
    if b.extras != "positional" and len(b.inputs) < 2:
        raise MalformedProgram("only a block with extra inputs packs them")
    if b.pack and (not b.args or b.attrs):
        raise MalformedProgram("only Python arguments passed at the call are packed in an object")
    if EXTRA_PACKS[b.extras].keywords and (b.pack or (b.args and not b.attrs)
                                           or (b.kind == "function" and (b.weights or b.buffers))):
        # a function block is passed its weights and buffers positionally after its tensors
        raise MalformedProgram("tensors passed by keyword leave no Python argument or weight to pass positionally "
                               "after them")
    _check_takes(program)


def _check_takes(program: Program) -> None:
    """One more argument beside a block's tensors (generators.inputs.TAKES)."""
    taking = [blk for blk in program.blocks() if blk.takes]
    if taking and program.options.door:
        raise MalformedProgram(f"door {program.options.door} calls blocks of their tensors alone")
    for blk in taking:
        _enum(blk.takes, tuple(TAKES), "argument a block takes")
        if blk.name and not TAKES[blk.takes].sub:
            raise MalformedProgram(f"sub-block {blk.name!r}: {blk.takes} is taken by the layer block only")
    take = TAKES.get(program.block.takes)
    for _, c in program.repeats():
        if take is None and c.given:
            raise MalformedProgram("a repeat passes `given` to a block that takes none")
        if take is not None and c.given not in dict(take.variants):
            raise MalformedProgram(f"a repeat passes {c.given!r} as `given`: use one of {', '.join(dict(take.variants))}")


def _check_subs(program: Program) -> None:
    """The block hierarchy: named sub-blocks of one tensor and no Python
    arguments, each called somewhere, no deeper than MAX_DEPTH levels."""
    names = [sb.name for sb in program.subs]
    if len(set(names)) != len(names):
        raise MalformedProgram(f"sub-blocks need distinct names: {names}")
    for sb in program.subs:
        where = f"sub-block {sb.name!r}"
        if not sb.name.isidentifier() or not sb.name.islower() or sb.name.startswith("_"):
            raise MalformedProgram(f"{where}: a name is a lower-case identifier")
        _enum(sb.kind, BLOCK_KINDS, "block kind")
        if len(sb.inputs) != 1 or sb.args or sb.buffers or sb.attrs:
            raise MalformedProgram(f"{where}: takes one tensor, no Python arguments, no buffers")
        if sb.kind == "function" and sb.weights:
            raise MalformedProgram(f"{where}: only module sub-blocks own parameters")
        local = [*sb.inputs, *(n for n, _ in sb.weights), *(st.out for st in sb.body)]
        if len(set(local)) != len(local):
            raise MalformedProgram(f"{where}: duplicate names {local}")
        for stmt in sb.body:
            if stmt.op not in OPS:
                raise MalformedProgram(f"unknown op {stmt.op!r}")
            if OPS[stmt.op].random:
                raise MalformedProgram(f"{where}: random ops stay in the layer block")
            if any(isinstance(o, (Arg, Free)) for o in stmt.operands):
                raise MalformedProgram(f"{where}: reads no Python arguments or free values")
        if returns_view(sb):
            raise MalformedProgram(f"{where}: returns a view of its input")
    for b in program.blocks():
        _enum(b.holder, HOLDERS, "holder of child modules")
        _enum(b.reuse, REUSES, "reuse of a nested_compile_region body")
        if b.reuse and not b.compile_region:
            raise MalformedProgram(f"block {b.name or 'layer'}: reuse {b.reuse!r} is nested_compile_region's")
        if b.reuse == "hash" and not keyable(program, b):
            raise MalformedProgram(f"block {b.name or 'layer'}: its calls carry what a reuse key cannot read "
                                   "(generators.check.keyable)")
        for stmt in (st for st in b.body if st.op == CHILD):
            ops = stmt.operands
            if not (isinstance(ops[1], Const) and isinstance(ops[2], Const) and isinstance(ops[2].value, int)):
                raise MalformedProgram(f"{stmt.out}: a sub-block call names its block and slot as constants")
            child = program.sub(ops[1].value)
            if child.kind == "module" and b.kind != "module":
                raise MalformedProgram(f"{stmt.out}: a function block calls only function sub-blocks")
            if child.kind == "function" and ops[2].value != 0:
                raise MalformedProgram(f"{stmt.out}: a function sub-block has one slot, 0")
    called = {name for b in program.blocks() for name, _ in b.children()}
    if set(names) - called:
        raise MalformedProgram(f"sub-blocks never called: {sorted(set(names) - called)}")
    if program.depth() > MAX_DEPTH:
        raise MalformedProgram(f"blocks nest {program.depth()} levels deep, at most {MAX_DEPTH}")


def _check_frees(program: Program, block_names: list[str]) -> None:
    names = [f.name for f in program.frees]
    if len(set(names)) != len(names) or set(names) & set(block_names):
        raise MalformedProgram(f"free values need names of their own: {names}")
    for f in program.frees:
        _enum(f.home, HOMES, "home of a free value")
        if not f.name.isidentifier() or f.name.startswith("_"):
            raise MalformedProgram(f"free value name {f.name!r} is not a plain identifier")
        if f.default and (f.home != "dict" or len(f.default) != 1):
            raise MalformedProgram(f"free value {f.name}: only an item of the dict home is read with a default")
        if f.home == "class_attr" and isinstance(f.value, Fn) and program.block.kind == "module":
            raise MalformedProgram(f"free value {f.name}: a callable class attribute would bind to the instance")
    homes = {f.name: f.home for f in program.frees}
    calls = [c for _, c in program.repeats()]
    set_names = {n for c in calls for n, _ in c.sets}
    for name in set_names:
        if homes.get(name) not in SETTABLE:
            raise MalformedProgram(f"{name}: only a free value living in one of {SETTABLE} is rebound in a call")
        if any(name not in dict(c.sets) for c in calls):
            raise MalformedProgram(f"{name}: a value rebound in a call is rebound before every repeat")
    for c in calls:
        if len(dict(c.sets)) != len(c.sets):
            raise MalformedProgram("a repeat rebinds each free value once")
    used = {o.name for s in program.block.body for o in s.operands if isinstance(o, Free)}
    if used - set(names):
        raise MalformedProgram(f"free values read but not declared: {sorted(used - set(names))}")
    if set(names) - used:
        raise MalformedProgram(f"free values declared but never read: {sorted(set(names) - used)}")


def may_require_grad(program: Program) -> bool:
    """Whether some tensor of the program may require grad: an input that
    does, a parameter (of any block), or one a block is given (generators.inputs)."""
    return any(spec.requires_grad for _, spec in program.inputs) or any(
        b.weights or (b.takes and TAKES[b.takes].grads) for b in program.blocks())


def _check_spellings(program: Program) -> None:
    """What a statement's spelling needs beyond its types (stmt_type checks
    those): ``out=`` where nothing requires grad (autograd refuses it), one
    module global per module spelling."""
    written = [(b.name, s) for b in program.blocks() for s in b.body if s.spelling]
    if any(s.spelling == "out" for _, s in written) and may_require_grad(program):
        raise MalformedProgram("an out= spelling where a tensor requires grad: autograd refuses out=")
    names = [instance_name(name, s.out) for name, s in written if s.spelling == "module"]
    if len(set(names)) != len(names):
        raise MalformedProgram(f"two module spellings would share a global: {names}")


def _check_mutation(program: Program) -> set[str]:
    for sb in program.subs:
        mutation_rules(sb, {})
    return mutation_rules(program.block, dict(program.inputs))


def mutation_rules(b: Block, specs: dict[str, TensorSpec], finished: bool = True) -> set[str]:
    """The in-place rules; returns the block inputs that the block mutates.

    ``finished=False`` checks a block still being built (its result not final).
    """
    producer: dict[str, OpSpec] = {}
    readers: dict[str, int] = {}
    consumed: set[str] = set()
    mutated_inputs: set[str] = set()
    written: set[str] = set()  # results of in-place writes to inputs: the next repeat writes them again
    eager_aliased: set[str] = set()  # read by an op whose eager result may be its operand itself
    weights = {n for n, _ in (*b.weights, *b.buffers)}
    for stmt in b.body:
        op = OPS[stmt.op]
        refs = [o.name for o in stmt.operands if isinstance(o, Ref)]
        for name in refs:
            if name in consumed:
                raise MalformedProgram(f"{stmt.out}: reads {name} after it was mutated in place; read the result instead")
        if op.inplace:
            target = refs[0]
            where = f"{stmt.out} = {stmt.op}({target}, ...)"
            if target in weights:
                raise MalformedProgram(f"{where}: parameters and buffers are not mutated in place")
            if target == b.inputs[0]:
                raise MalformedProgram(f"{where}: the primary input is not mutated in place")
            if target in b.inputs:
                spec = specs[target]
                if spec.requires_grad or spec.layout != "contiguous" or spec.dtype != "float32":
                    raise MalformedProgram(f"{where}: only contiguous float32 inputs without grad are mutated")
                mutated_inputs.add(target)
                written.add(stmt.out)  # the in-place result is the input itself
            else:
                made_by = producer[target]
                if made_by.view or made_by.saves_output:
                    raise MalformedProgram(f"{where}: {target} is a view or saved for backward")
                if readers.get(target):
                    raise MalformedProgram(f"{where}: {target} was already read")
            consumed.add(target)
        for name in refs:
            readers[name] = readers.get(name, 0) + 1
        if op.eager_alias and refs:
            eager_aliased.add(refs[0])
        producer[stmt.out] = op
    if mutated_inputs & eager_aliased:  # a write, this repeat or the next, shows through eager's result alone
        raise MalformedProgram(f"{', '.join(sorted(mutated_inputs & eager_aliased))} is written in place and read by an "
                               "op whose eager result may be its operand itself (OpSpec.eager_alias), which compiled "
                               "code need not be")
    for stmt in b.body:
        op = OPS[stmt.op]
        for o in stmt.operands:
            if isinstance(o, Ref) and o.name in mutated_inputs | written and op.saves_inputs and not op.inplace:
                raise MalformedProgram(f"{stmt.out}: {op.name} saves {o.name} for backward, but the block mutates it")
    if finished:
        live = live_values(b)
        for stmt in b.body:
            if OPS[stmt.op].random and stmt.out not in live:
                # Compilers drop dead code, and with it the random numbers it
                # would have drawn: every later draw would then differ from eager.
                raise MalformedProgram(f"{stmt.out} = {stmt.op}(...): a random op's result must reach the block's result")
    if finished and b.result in consumed:
        raise MalformedProgram(f"block result {b.result} was mutated in place; return the in-place result")
    return mutated_inputs


def _check_section(program: Program, k: int, s: Section, mutates: bool) -> None:
    b = program.block
    where = f"section {k}"
    for f in fields(Context):
        values = [getattr(c.context, f.name) for c in s.calls]
        if any(v is None for v in values) and any(v is not None for v in values):
            raise MalformedProgram(f"{where}: context {f.name} is set for some repeats only")
    if any(len(c.args) != len(b.args) for c in s.calls):
        raise MalformedProgram(f"{where}: every repeat must give a value to every block argument")
    if any(c.tensor is not None for c in s.calls):
        if s.flow != "fanout":
            raise MalformedProgram(f"{where}: per-repeat tensors need fanout flow")
        if any(c.tensor is None for c in s.calls):
            raise MalformedProgram(f"{where}: per-repeat tensors are given for every repeat or none")
        names = dict(program.inputs)
        if any(c.tensor not in names for c in s.calls):
            raise MalformedProgram(f"{where}: per-repeat tensor is not a program input")
    for c in s.calls:
        _enum(c.view, VIEWS, "call-site view")
        if c.view != "none" and c.tensor is None:
            raise MalformedProgram(f"{where}: a call-site view needs a per-repeat tensor")
    if any(c.frozen for c in s.calls) and (b.kind != "module" or s.structure not in PER_INSTANCE):
        raise MalformedProgram(f"{where}: only per-repeat module instances can be frozen")
    if any(c.context.inference for c in s.calls):
        if s.flow != "fanout" or mutates or b.buffers or any(OPS[st.op].inplace for st in b.body):
            raise MalformedProgram(f"{where}: inference-mode repeats must feed only outputs and mutate nothing")
        if any(c.context.grad is not None for c in s.calls):
            raise MalformedProgram(f"{where}: grad mode and inference mode are not drawn together")
    if any(c.context.grad is False or c.context.inference for c in s.calls) and (returns_view(b) or second_is_view(b)):
        raise MalformedProgram(f"{where}: a repeat without grad must not return a view (autograd rejects it)")
    for c in s.calls:
        _enum(c.alias, ALIASES, "alias of the first extra input")
    if any(c.alias for c in s.calls) and len(b.inputs) < 2:
        raise MalformedProgram(f"{where}: only a block with an extra input is passed an alias")
    if any(c.alias for c in s.calls) and b.inputs[1] in mutation_rules(b, dict(program.inputs)):
        raise MalformedProgram(f"{where}: an input that may alias the primary is not written by the block")
    if s.write is not None:
        _check_write(program, where, s.write)
    for c in s.calls:
        if c.how:
            _check_form(program, where, s, c)
    if s.structure in ("for_values", "for_tuple") and not has_columns(program, s):
        raise MalformedProgram(f"{where}: a loop over values needs something to iterate over")
    if s.bracket:
        _check_bracket(where, s)


def _check_bracket(where: str, s: Section) -> None:
    """One bracket around the calls holds only where they all run in one context (what each call computes
    stays what it computes in a bracket of its own) and nothing else runs in it that the context would change
    (an interlude's ops, a write under inference mode)."""
    first = s.calls[0].context
    if first == Context() or any(c.context != first for c in s.calls):
        raise MalformedProgram(f"{where}: one bracket around the calls needs one context, the same for every call")
    if s.interleave or (s.write and first.inference):
        raise MalformedProgram(f"{where}: one bracket around the calls holds no interlude and no write under "
                               "inference mode")


def default_value(program: Program) -> Value:
    """The default of the layer's last Python parameter (``bind:default``):
    the value the program's first repeat passes."""
    return program.repeats()[0][1].args[-1]


def checked(program: Program) -> Optional[Program]:
    """``program`` if it is valid, else None."""
    try:
        check(program)
    except MalformedProgram:
        return None
    return program


def with_form(program: Program, k: int, i: int, how: str) -> Optional[Program]:
    """Call ``i`` of section ``k`` written in the form ``how`` (a call that
    takes the default passes the default's value), or None if invalid."""
    call = replace(program.sections[k].calls[i], how=how)
    if how == "bind:default":
        call = replace(call, args=call.args[:-1] + (default_value(program),))
    return checked(with_call(program, k, i, call))


def as_separate_calls(program: Program, k: int) -> Optional[Program]:
    """Section ``k``'s loop written as separate call statements (where forms
    are written), or None if invalid."""
    s = program.sections[k]
    return checked(replace(program, sections=program.sections[:k] + (replace(s, structure="calls", outer=1),)
                           + program.sections[k + 1:]))


def _check_form(program: Program, where: str, s: Section, c: Call) -> None:
    """A repeat written in a call-site form (generators.forms)."""
    b = program.block
    _enum(c.how, tuple(FORMS), "call-site form")
    form = FORMS[c.how]
    if s.structure != "calls":
        raise MalformedProgram(f"{where}: call-site forms are written only where each call is its own statement")
    if not applies(form, b.kind, len(b.args), not (b.pack or b.attrs)):
        raise MalformedProgram(f"{where}: form {c.how} does not apply to this {b.kind} block")
    if c.how == "bind:default":
        if any(f.home == "argument" for f in program.frees):
            raise MalformedProgram(f"{where}: bind:default needs the Python arguments last in the signature")
        if typed_key(c.args[-1]) != typed_key(default_value(program)):
            raise MalformedProgram(f"{where}: bind:default leaves out a value other than the default")


def _check_write(program: Program, where: str, write: tuple[str, str]) -> None:
    name, mode = write
    _enum(mode, WRITES, "in-place write")
    if name not in program.block.inputs[1:]:
        raise MalformedProgram(f"{where}: writes {name!r}, which is not an extra input of the block")
    problem = unwritable(program, name)
    if problem:
        raise MalformedProgram(f"{where}: {problem}")


def unwritable(program: Program, name: str) -> str | None:
    """Why the extra input ``name`` may not be written in place between
    repeats (None: it may). Eager stays valid only if autograd saved nothing
    of it and no value aliases it; the generator draws among the inputs this
    allows, so a drawn write is never one the check throws away."""
    b = program.block
    specs = dict(program.inputs)
    spec = specs[name]
    if spec.requires_grad or spec.layout != "contiguous" or spec.dtype != "float32" or not spec.shape:
        return "only contiguous float32 inputs without grad, of rank >= 1, are written"
    if name in mutation_rules(b, specs):
        return f"the block writes {name} itself"
    if name not in live_values(b):
        return f"the block never uses {name}, so a write to it tests nothing"
    # Autograd saves tensors only where something requires grad.
    grad = may_require_grad(program)
    for stmt in b.body:
        op = OPS[stmt.op]
        if Ref(name) in stmt.operands and (op.inplace or (grad and (op.saves_inputs or op.view))):
            return f"{stmt.out} = {stmt.op}({name}) keeps {name} for backward"
        if Ref(name) in stmt.operands and op.eager_alias:  # a later write shows through eager's result alone
            return f"{stmt.out} = {stmt.op}({name}) may be {name} itself in eager, which compiled code need not be"
    return None


# Homes whose in-call rebinding Dynamo cannot trace (SimpleNamespace.__setattr__): a graph break.
BREAKING_SETS = ("namespace",)


# Subclass values whose construction in traced code Dynamo cannot trace (a graph break):
# float subclasses (int subclasses trace, as UserDefinedConstantVariable).
BREAKING_SUBCLASSES = ("FloatSub",)


def has_graph_breaks(program: Program) -> bool:
    homes = {f.name: f.home for f in program.frees}
    # A form that makes the carried value a Tensor subclass, met a second
    # time on the chain: Dynamo breaks on ``as_subclass`` of a subclass
    # instance ("Unhandled args for method"), so fullgraph cannot be asked.
    rewrapped = sum(bool(c.how) and FORMS[c.how].carries and s.flow != "fanout"
                    for s in program.sections for c in s.calls) >= 2
    # Data-dependent ops (an unbacked size, .item()) break the graph unless
    # Dynamo is told to capture them (the dynamic:unbacked door does).
    return rewrapped or sizes_follow_values(program) or any(
        INTERLUDES[n].breaks for n in (*program.interludes, *(s.interleave for s in program.sections)) if n
    ) or any(homes.get(n) in BREAKING_SETS for _, c in program.repeats() for n, _ in c.sets) or any(
        isinstance(v, Sub) and v.cls in BREAKING_SUBCLASSES for _, c in program.repeats()
        for v in (*c.args, *(v for _, v in c.sets)))


def live_values(b: Block) -> set[str]:
    """Statements whose effect the caller can see: the result, what it reads,
    and side effects (mutating an input, updating a buffer)."""
    needed = {b.result}
    for stmt in reversed(b.body):
        op = OPS[stmt.op]
        refs = [o.name for o in stmt.operands if isinstance(o, Ref)]
        side_effect = (op.inplace and refs[0] in b.inputs) or any(isinstance(s, W) and s.buffer for s in op.slots)
        if stmt.out in needed or side_effect:
            needed.add(stmt.out)
            needed.update(refs)
    return needed


def mutates(b: Block) -> bool:
    """Whether the block writes anything in place: an input, an intermediate
    (maybe through a view) or a buffer (batch-norm statistics)."""
    return any(OPS[s.op].inplace or any(isinstance(x, W) and x.buffer for x in OPS[s.op].slots) for s in b.body)


def second_is_view(b: Block) -> bool:
    """Whether what a block returns beside its result is a view: a view kind of return
    (generators.returns), or the first value it computes (``{v}``) made by a view op."""
    if b.returns not in RETURNS:
        return False
    r = RETURNS[b.returns]
    first = OPS.get(b.body[0].op) if b.body else None
    return r.view or ("{v}" in r.second and first is not None and first.view) or ("{r}" in r.second and returns_view(b))


def returns_view(b: Block) -> bool:
    made_by = {s.out: OPS[s.op] for s in b.body}
    return b.result in made_by and made_by[b.result].view


def may_alias(program: Program) -> bool:
    """Whether some block's inputs or outputs may share storage (what a higher-order operator's body may not
    have): a block returning an input, a view, one tensor twice or an output viewing another, one writing in
    place, or a call passing the same tensor twice or a view of it. An over-estimate: False only where no
    block can alias."""
    return any((b.returns in RETURNS and RETURNS[b.returns].shares) or returns_view(b) or second_is_view(b)
               or mutates(b) for b in program.blocks()) or any(c.alias for _, c in program.repeats())


def has_columns(program: Program, s: Section) -> bool:
    """Whether a loop over values has a value per repeat to iterate over."""
    b = program.block
    return bool(b.args and not b.attrs) or len({(c.tensor, c.view, c.alias, c.given) for c in s.calls}) > 1 or len(
        {c.context for c in s.calls}
    ) > 1 or any(c.sets for c in s.calls)


def block_types(program: Program, call: Call, carried: TT) -> dict[str, TT]:
    """Types of every value in the block for one repeat; raises MalformedProgram."""
    b = program.block
    specs = dict(program.inputs)
    if call.tensor is not None:
        try:
            primary = CALL_VIEWS[call.view][1](spec_type(specs[call.tensor]))
        except Reject as e:
            raise MalformedProgram(f"per-repeat tensor {call.tensor} ({call.view}): {e}") from e
    else:
        primary = carried
    scope: dict[str, TT] = {b.inputs[0]: primary}
    scope.update({n: spec_type(specs[n]) for n in b.inputs[1:]})
    if call.alias:
        scope[b.inputs[1]] = alias_type(call.alias, primary)
    scope.update({n: spec_type(spec) for n, spec in (*b.weights, *b.buffers)})
    row = {f.name: f.value for f in program.frees} | dict(call.sets) | dict(zip(b.args, call.args))
    env = env_of(call.context)
    for stmt in b.body:
        try:
            scope[stmt.out] = stmt_type(OPS[stmt.op], stmt, scope, row, env, sub_typer(program))
        except Reject as e:
            raise MalformedProgram(f"{stmt.out} = {stmt.op}(...): {e}") from e
    if b.result not in scope or b.result in b.inputs:
        raise MalformedProgram(f"block result {b.result!r} is undefined")
    return scope


def alias_type(alias: str, primary: TT) -> TT:
    """The type of the first extra input when a repeat passes the primary
    itself ("same") or its last-dim slice ``[..., :1]`` ("view")."""
    if alias == "view":
        if not primary.shape:
            raise MalformedProgram("a view alias slices the last dim of a tensor of rank >= 1")
        return TT(primary.shape[:-1] + (1,), primary.dtype, False)
    return primary


def sub_typer(program: Program) -> SubTyper:
    """Types a sub-block call by its body (see ``sub_scope``)."""
    return lambda name, primary, env: sub_scope(program, name, primary, env)[program.sub(name).result]


@functools.lru_cache(maxsize=256)
def sub_scope(program: Program, name: str, primary: TT, env: Env) -> dict[str, TT]:
    """The type of every value of sub-block ``name`` called on ``primary``;
    raises Reject naming the sub-block."""
    sb = program.sub(name)
    scope = {sb.inputs[0]: primary, **{n: spec_type(spec) for n, spec in sb.weights}}
    for stmt in sb.body:
        try:
            scope[stmt.out] = stmt_type(OPS[stmt.op], stmt, scope, {}, env, sub_typer(program))
        except Reject as e:
            raise Reject(f"in sub-block {name!r}: {stmt.out} = {stmt.op}(...): {e}") from e
    if sb.result not in scope or sb.result == sb.inputs[0]:
        raise Reject(f"sub-block {name!r}: result {sb.result!r} is undefined")
    return scope


def sub_scopes(program: Program) -> list[dict[str, TT]]:
    """The scope of every sub-block call the program makes (one per distinct
    input type and ambient state)."""
    return list(named_sub_scopes(program).values())


def named_sub_scopes(program: Program) -> dict[tuple, dict[str, TT]]:
    """``sub_scopes`` keyed by (sub-block, input type, ambient state)."""
    seen: dict[tuple, dict[str, TT]] = {}

    def visit(b: Block, scope: dict[str, TT], env: Env) -> None:
        for stmt in b.body:
            if stmt.op == CHILD:
                name, primary = stmt.operands[1].value, scope[stmt.operands[0].name]
                if (name, primary, env) not in seen:
                    seen[(name, primary, env)] = inner = sub_scope(program, name, primary, env)
                    visit(program.sub(name), inner, env)

    if program.subs:
        carried = spec_type(program.inputs[0][1])
        for _, call in program.repeats():
            visit(program.block, block_types(program, call, carried), env_of(call.context))
    return seen


# Categories whose ops never pin a dynamic dim to a constant (see Options.mark_dynamic).
DYNAMIC_SAFE = {"unary", "activation", "binary", "scalar", "compare", "reduce", "softmax", "merge", "dtype"}


def strict_mark_holds(program: Program) -> bool:
    """Whether a strict mark (``mark_dynamic``, not ``maybe_``) of the first input's batch dim can hold: one
    input, no weights or buffers, ops that keep sizes symbolic. Elsewhere the program may rightly pin the dim
    to a constant, and torch documents a ConstraintViolationError for that."""
    b = program.block
    return (len(program.inputs) == 1 and not b.weights and not b.buffers
            and all(OPS[s.op].category in DYNAMIC_SAFE and not OPS[s.op].shape_literals for s in b.body))


def sizes_follow_values(program: Program) -> bool:
    """Some size or Python number the program computes depends on tensor values (an unbacked op, a
    data-dependent return or take): new values may rightly recompile (generators.variants: not neutral)."""
    return any(OPS[st.op].category == "unbacked" for b in program.blocks() for st in b.body) or any(
        b.returns != SINGLE and not RETURNS[b.returns].fullgraph for b in program.blocks()) or any(
        b.takes in TAKES and not TAKES[b.takes].fullgraph for b in program.blocks())


def follows_values(program: Program) -> bool:
    """Some size or Python number the program computes depends on tensor values, a number an interlude reads
    with ``.item()`` too: what a setting that captures them changes (generators.settings)."""
    return sizes_follow_values(program) or any(i is not None and INTERLUDES[i].captured for i in program.interludes)


def suits(setting: str, program: Program) -> bool:
    """Whether the torch setting ``setting`` (generators.settings) can change anything about ``program``."""
    s = SETTINGS[setting]
    return (not s.module_layer or program.block.kind == "module") and (
        not s.data_dependent or follows_values(program))


def _plain_value(v) -> bool:  # type: ignore[no-untyped-def]
    """A value Dynamo sees as a constant (or a container of them), which a reuse key reads as it is."""
    if isinstance(v, (tuple, PyList)):
        return all(_plain_value(x) for x in (v if isinstance(v, tuple) else v.items))
    return v is None or isinstance(v, (bool, int, float, str))


def keyable(program: Program, block: Block) -> bool:
    """Whether ``block``'s nested_compile_region body can be reused by a key of its calls' arguments
    (Block.reuse "hash", generators.codegen.REUSE_KEY) as torch's contract for ``reuse_hash_fn`` asks: every
    input a tensor, a constant or a module (else Dynamo refuses the key: 'not eligible for reuse'), its result
    alone, and nothing the body reads that the key cannot see: no free value, no constructor attribute,
    no size the data decides, no symbolic shape (a key is a constant)."""
    if not block.compile_region or block.returns != "single" or block.takes == "data_dependent" \
            or block.attrs or block.pack or block.extras == "dataclass" \
            or program.options.dynamic or program.options.mark_dynamic:
        return False
    if any(isinstance(o, Free) for s in block.body for o in s.operands):
        return False
    if block.name:  # a sub-block takes one tensor and no Python arguments
        return True
    return all(_plain_value(v) for _, c in program.repeats() for v in c.args)


def fitting_autograd(program: Program) -> list[str]:
    """The autograd features (generators.autograd) ``program`` could be given, one alone."""
    if program.options.door or program.options.fullgraph:
        return []
    blocks = program.blocks()
    modules, weights = any(b.kind == "module" for b in blocks), any(b.weights for b in blocks)
    first = any(st.op != CHILD for st in program.block.body)
    return [n for n, f in AUTOGRAD.items()
            if autograd_fits(f, program.block.compile_region, modules, weights, any(b.compile_region for b in blocks))
            and (first or f.at not in ("mid", "output"))]


def _check_autograd(program: Program) -> None:
    """The autograd features (generators.autograd): known, one per family, where their contract allows:
    no door (a door's own contract says what reaches autograd), no fullgraph (Dynamo breaks the graph at
    some hooks), a side-effecting hook never in a region body, module hooks on module instances."""
    names = program.options.autograd
    if not names:
        return
    unknown = [n for n in names if n not in AUTOGRAD]
    families = [AUTOGRAD[n].family for n in names if n in AUTOGRAD]
    if unknown or len(set(families)) != len(families):
        raise MalformedProgram(f"autograd {list(names)}: at most one of each family of {', '.join(AUTOGRAD)}")
    if program.options.door or program.options.fullgraph:
        raise MalformedProgram("autograd features are drawn for plainly compiled programs without fullgraph")
    fit = fitting_autograd(program)
    for n in names:
        if n not in fit:
            raise MalformedProgram(f"autograd feature {n} does not fit this program (a side effect in a region "
                                   "body, module hooks without module instances, parameter hooks without parameters, "
                                   "a hook on the layer's first value where it has none, an annotation of the "
                                   "whole forward where a block is a nested_compile_region body)")


def check(program: Program) -> list[dict[str, TT]]:
    """Validate ``program``; return the type of every block value, per repeat."""
    _check_shape_of_program(program)
    _check_spellings(program)
    mutated = _check_mutation(program)
    b = program.block
    specs = dict(program.inputs)
    carried = spec_type(specs[program.inputs[0][0]])
    if has_graph_breaks(program) and program.options.fullgraph:
        raise MalformedProgram("fullgraph=True with a graph break drawn")
    if draws_random(program) and any(s.flow == "chain" for s in program.sections) and b.inputs[0] not in live_values(b):
        # All but the last call of the chain are then dead code, which a
        # compiler drops, and with it the random numbers eager draws.
        raise MalformedProgram("a chained block that draws random numbers must read its carried input")
    if program.outputs == "single" and any(s.flow == "fanout" for s in program.sections):
        raise MalformedProgram("a single output cannot return a fanout's results")
    for blk in program.blocks():
        if blk.returns != SINGLE and blk.returns not in RETURNS:
            raise MalformedProgram(f"block {blk.name or 'layer'} returns {blk.returns!r}: use one of "
                                   f"{', '.join((SINGLE, *RETURNS))}")
    if reads_second(program.block.returns) and program.outputs == "single":
        raise MalformedProgram("a single output cannot return what the layer's calls return beside their result")
    if program.block.returns != SINGLE and program.options.door:
        raise MalformedProgram(f"door {program.options.door} calls a layer returning one tensor")
    unknown = [n for n in program.options.settings if n not in SETTINGS]
    families = [SETTINGS[n].family for n in program.options.settings if n in SETTINGS]
    if unknown or len(set(families)) != len(families):
        raise MalformedProgram(f"settings {list(program.options.settings)}: at most one of each family of "
                               f"{', '.join(SETTINGS)}")
    _check_autograd(program)
    for name, dim, strict in program.options.mark_dynamic:
        if name not in specs or not 0 <= dim < len(specs[name].shape) or specs[name].shape[dim] < 2:
            raise MalformedProgram(f"cannot mark {name} dim {dim} dynamic")
        if strict and not strict_mark_holds(program):  # a mutation or a cut can break what the draw checked
            raise MalformedProgram(f"mark_dynamic({name}, {dim}) is strict, but the program may pin that dim (another "
                                   "input, a weight or an op that fixes sizes): torch raises ConstraintViolationError "
                                   "then, by design")
    per_repeat = []
    for k, s in enumerate(program.sections):
        _check_section(program, k, s, bool(mutated))
        for call in s.calls:
            scope = block_types(program, call, carried)
            result = scope[b.result]
            if b.takes and result.dtype not in FLOATS:
                raise MalformedProgram(f"section {k}: a block folding `given` into its result returns a float")
            if s.flow != "fanout" and (result.shape, result.dtype) != (carried.shape, carried.dtype):
                raise MalformedProgram(
                    f"section {k}: a {s.flow} block must return its input's shape and dtype: "
                    f"{result.shape}/{result.dtype} != {carried.shape}/{carried.dtype}"
                )
            per_repeat.extend([scope] * (s.outer if s.structure == "nested" else 1))
    for (name, _, _), scope in named_sub_scopes(program).items():
        sb = program.sub(name)
        if sb.takes and scope[sb.result].dtype not in FLOATS:
            raise MalformedProgram(f"sub-block {sb.name!r}: a block folding `given` into its result returns a float")
    return per_repeat


def broadcasts_to(small, big) -> bool:
    try:
        return broadcast(small, big) == big
    except Reject:
        return False


# Ops that sum (or pick among) values, where the sign of a zero result is the
# implementation's choice: whether a sum of -0.0s starts from +0.0.
SUMMING = ("reduce", "linalg", "norm", "softmax")


def aliases_outside_schema(program: Program) -> bool:
    """An op of the program may hand back its input itself in eager though its schema promises a
    new tensor (OpSpec.eager_alias): what its outputs share storage with is eager's accident there."""
    return any(OPS[s.op].eager_alias for b in program.blocks() for s in b.body if s.op in OPS)


@functools.lru_cache(maxsize=64)
def zero_signs_determined(program: Program) -> bool:
    """Whether the sign of every zero the program computes follows from IEEE
    rules alone (no summing op and no lerp: see SUMMING)."""
    return not any(OPS[s.op].category in SUMMING or s.op in ("merge_mean", "lerp")
                   for b in program.blocks() for s in b.body)


MANTISSA_BITS = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}


@functools.lru_cache(maxsize=64)  # every value-comparing oracle asks, for every program
def dtypes_used(program: Program) -> set[str]:
    """Every dtype a value of the program has (inputs, weights, buffers, every step's result)."""
    dtypes = {spec.dtype for _, spec in (*program.inputs, *program.block.weights, *program.block.buffers)}
    dtypes |= {t.dtype for scope in check(program) for t in scope.values()}
    dtypes |= {t.dtype for scope in sub_scopes(program) for t in scope.values()}
    if any(".float()" in OPS[s.op].fmt for b in program.blocks() for s in b.body):  # a float32 step inside one op
        dtypes.add("float32")
    return dtypes


def lowest_precision(program: Program) -> str:
    """The least precise floating dtype any value of the program passes
    through: no result can be more accurate than that, whatever its dtype."""
    floats = [d for d in dtypes_used(program) if d in MANTISSA_BITS]
    return min(floats, key=MANTISSA_BITS.__getitem__, default="float32")
