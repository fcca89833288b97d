"""Front doors to the capture pipeline: the ways users reach Dynamo and
``invoke_subgraph`` other than ``torch.compile(model)(x)``.

A program carries at most one door (``Options.door``); one entry here per
door, as data. "call" doors wrap how the whole program is called (a
function transform around the compiled model, ``torch.export``, a warm
compile cache, symbolic shapes): ``harness.doors`` runs them. "source"
doors rewrite every call of the repeated block in the program's source
(activation checkpointing, a function transform around each call, a
control-flow operator whose branches or body are the call): ``write`` is
the call as the door writes it, ``reference`` the same computation in plain
Python where the door's operator is itself compiled in eager (``torch.cond``
and its kin trace their branches with Dynamo even outside
``torch.compile``), so ground truth stays eager's. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .returns import SINGLE

# A source door's writer: (the call as a one-argument lambda's source, the
# tensor it is applied to) -> an expression.
Writer = Callable[[str, str], str]


@dataclass(frozen=True)
class Door:
    name: str
    family: str  # transform, checkpoint, control_flow, export, cache, dynamic
    rule: str  # what the door promises, one line
    where: str  # "call": around the program's call (harness.doors); "source": around every block call
    write: Optional[Writer] = None  # source doors
    reference: Optional[Writer] = None  # source doors whose operator compiles in eager: plain Python
    backward: bool = True  # the run's outputs are differentiated (False: they are derivatives already)
    weight: int = 4  # relative share of the programs given a door that get this one
    imports: tuple[str, ...] = ()
    prelude: tuple[str, ...] = ()  # names of PRELUDE definitions it uses
    resize: bool = False  # a second call with the batch dimension grown (symbolic shapes)
    inductor: bool = False  # only inductor can keep the door's promise (the compile caches)
    # The programs the door's documented contract covers (None: every one);
    # a campaign gives a door only to programs it fits.
    fits: Optional[Callable[[object], bool]] = None
    # What the door adds to a program it is given (None: nothing): the
    # constructs only it lets Dynamo capture whole.
    furnish: Optional[Callable[[object], object]] = None

    @property
    def gradients(self) -> bool:
        """Its promise is about gradients (it computes them, or recomputes for
        them): nothing to check on a forward-only run."""
        return not self.backward or self.family == "checkpoint"


def _plain_tensors(program) -> bool:
    """Function transforms, control-flow operators and torch.export take
    plain tensors (and traceable wrapper subclasses): a Python-level
    ``torch.Tensor`` subclass argument is outside what they support."""
    return not any(c.how == "type:tensor_subclass" for s in program.sections for c in s.calls)


def _steady_default_dtype(program) -> bool:
    """A door that runs the call's code again, or traces it apart from its
    caller (checkpointing's recompute in backward, a control-flow operator's
    or a transform's own trace, export), runs it under the default dtype in
    force then, which torch.utils.checkpoint does not save (it saves RNG
    and autocast state): the door fits programs whose calls keep the default
    dtype, where the recompute computes what the forward did."""
    return all(c.context.default_dtype is None for s in program.sections for c in s.calls)


def _fits_all(*rules) -> Callable[[object], bool]:
    return lambda program: all(rule(program) for rule in rules)


def _recomputable(program) -> bool:
    """Checkpointing runs the call again in backward, reading what it reads
    then: the door fits programs that rebind no free value between calls
    and write no input in place after one (checkpointing's documented
    requirement that the recompute computes what the forward did)."""
    return not any(c.sets for s in program.sections for c in s.calls) and not any(
        s.write for s in program.sections)


# Doors that trace the call apart from its caller, on plain tensors; doors
# that run it again later.
TRACED = _fits_all(_plain_tensors, _steady_default_dtype)
RECOMPUTED = _fits_all(_recomputable, _steady_default_dtype)


def _reentrant_contract(program) -> bool:
    """Reentrant checkpointing runs its forward under no_grad, tracks
    gradients only through its inputs, and makes every output require grad
    (torch.utils.checkpoint's note on the two variants: an input and an
    output must require grad): the door fits programs that read no grad
    mode, change no global state around their calls, and whose block's
    result reads the input it is checkpointed over."""
    from .check import live_values
    from .ir import Context

    reads = {"grad_enabled_branch", "requires_grad_branch"}
    return not any(s.op in reads for b in program.blocks() for s in b.body) and all(
        c.context == Context() for s in program.sections for c in s.calls) \
        and program.block.inputs[0] in live_values(program.block)


# Ops whose value depends on the data (generators.ops, category "unbacked").
UNBACKED_OPS = ("nonzero_count", "masked_select_sum", "item_scale")


def _with_unbacked(program):
    """The layer block ending in a data-dependent op (one of UNBACKED_OPS, by
    seed) on its result, so every repeat computes an unbacked size or a
    captured scalar; the program unchanged where that op does not fit."""
    from dataclasses import replace

    from .check import check
    from .ir import MalformedProgram, Ref, Stmt

    b = program.block
    if any(st.op in UNBACKED_OPS for st in b.body):
        return program
    names = {st.out for st in b.body} | set(b.inputs)
    out = next(f"dd{k}" for k in range(len(names) + 1) if f"dd{k}" not in names)
    stmt = Stmt(out, UNBACKED_OPS[program.seed % len(UNBACKED_OPS)], (Ref(b.result),))
    furnished = replace(program, block=replace(b, body=(*b.body, stmt), result=out),
                        options=replace(program.options, fullgraph=False))
    try:
        check(furnished)
    except MalformedProgram:
        return program
    return furnished


def _ckpt(reentrant: str, extra: str = "") -> Writer:
    return lambda fn, t: f"torch.utils.checkpoint.checkpoint({fn}, {t}, use_reentrant={reentrant}{extra})"


SELECTIVE = (", context_fn=functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts, "
             "[torch.ops.aten.mm.default, torch.ops.aten.sin.default])")

DOORS_LIST = (
    Door("transform:grad", "transform", "torch.func.grad of the summed outputs equals autograd's gradient", "call",
         backward=False,
         fits=TRACED),
    Door("transform:vjp", "transform", "torch.func.vjp returns the outputs and the vector-Jacobian product", "call",
         backward=False,
         fits=TRACED),
    Door("transform:jacrev", "transform", "torch.func.jacrev computes the Jacobian row by row", "call",
         backward=False, weight=2,
         fits=TRACED),
    Door("transform:vmap", "transform", "torch.func.vmap over a batch computes each sample as the unbatched call",
         "call",
         fits=TRACED),
    Door("transform:functional_call", "transform",
         "torch.func.functional_call runs the module with the given parameters in place of its own", "call",
         fits=TRACED),
    Door("transform:vmap_each", "transform", "torch.func.vmap around each block call maps it over the leading dim",
         "source", write=lambda fn, t: f"torch.func.vmap({fn})({t})",
         fits=TRACED),
    Door("checkpoint:non_reentrant", "checkpoint", "checkpointing recomputes, never changes, values and gradients",
         "source", write=_ckpt("False"), fits=RECOMPUTED),
    # Reentrant checkpointing of a call whose inputs need no gradient is
    # documented as unsupported (its parameters get none in eager): the door
    # checkpoints only calls whose input requires grad, as its contract says.
    Door("checkpoint:reentrant", "checkpoint", "reentrant checkpointing recomputes in backward: the same values",
         "source", write=lambda fn, t: f"({_ckpt('True')(fn, t)} if {t}.requires_grad else ({fn})({t}))",
         fits=_fits_all(_reentrant_contract, RECOMPUTED)),
    Door("checkpoint:selective", "checkpoint", "selective checkpointing saves what the policy names, recomputes the rest",
         "source", write=_ckpt("False", SELECTIVE), imports=("functools",),
         fits=RECOMPUTED),
    Door("control_flow:cond", "control_flow", "torch.cond runs the branch its predicate picks",
         "source",
         write=lambda fn, t: f"torch.cond({t}.sum() > 0, {fn}, lambda _u: ({fn})(_u * 0.5), ({t},))",
         reference=lambda fn, t: f"(({fn})({t}) if {t}.sum() > 0 else ({fn})({t} * 0.5))",
         fits=TRACED),
    Door("control_flow:while_loop", "control_flow", "while_loop runs its body while the condition holds",
         "source",
         write=lambda fn, t: (f"torch._higher_order_ops.while_loop(lambda _i, _u: _i < 2, "
                              f"lambda _i, _u: (_i + 1, ({fn})(_u)), (torch.zeros((), dtype=torch.int64), {t}))[1]"),
         reference=lambda fn, t: f"({fn})(({fn})({t}))",
         fits=TRACED),
    Door("control_flow:map", "control_flow", "map applies its body to each slice of the leading dim and stacks",
         "source",
         write=lambda fn, t: f"torch._higher_order_ops.map({fn}, {t})",
         reference=lambda fn, t: f"torch.stack([({fn})(_r) for _r in {t}.unbind(0)])",
         fits=TRACED),
    Door("control_flow:scan", "control_flow", "scan carries a value through its body over the leading dim",
         "source",
         write=lambda fn, t: (f"torch._higher_order_ops.scan(lambda _c, _r: scan_step({fn}, _c, _r), "
                              f"torch.zeros_like({t}[0]), {t})[1]"),
         reference=lambda fn, t: f"scan_reference({fn}, {t})", prelude=("scan_step",),
         fits=TRACED),
    Door("export:strict", "export", "torch.export (strict) runs what eager runs", "call", weight=3,
         fits=TRACED),
    Door("export:non_strict", "export", "torch.export (non-strict) runs what eager runs", "call", weight=3,
         fits=TRACED),
    Door("export:unflatten", "export", "the unflattened exported program runs what eager runs", "call", weight=2,
         fits=TRACED),
    Door("export:compile", "export", "torch.compile of the exported module runs what eager runs", "call", weight=2,
         fits=TRACED),
    Door("cache:warm", "cache", "a compile served by the FX graph and AOTAutograd caches computes what the cold one did",
         "call", weight=1, inductor=True),
    Door("dynamic:dynamic", "dynamic", "dynamic=True compiles one graph for every batch size", "call", resize=True),
    Door("dynamic:mark", "dynamic", "mark_dynamic keeps the batch dimension symbolic", "call", resize=True),
    Door("dynamic:maybe_mark", "dynamic", "maybe_mark_dynamic lets the batch dimension be symbolic", "call",
         resize=True),
    Door("dynamic:unbacked", "dynamic", "data-dependent sizes and captured scalars stay symbolic (unbacked)", "call",
         resize=True, furnish=_with_unbacked),
)
DOORS: dict[str, Door] = {d.name: d for d in DOORS_LIST}
FAMILIES = tuple(dict.fromkeys(d.family for d in DOORS_LIST))

PRELUDE = {
    "scan_step": ("def scan_step(fn, carry, row):\n"
                  "    out = fn(carry + row)\n"
                  "    return out, out.clone()\n\n\n"
                  "def scan_reference(fn, xs):\n"
                  "    carry, ys = torch.zeros_like(xs[0]), []\n"
                  "    for row in xs.unbind(0):\n"
                  "        carry, y = scan_step(fn, carry, row)\n"
                  "        ys.append(y)\n"
                  "    return torch.stack(ys)"),
}


def door_of(program) -> Optional[Door]:
    """The program's door (None: the plain call)."""
    return DOORS.get(program.options.door) if program.options.door else None


def source_door(program) -> Optional[Door]:
    d = door_of(program)
    return d if d is not None and d.where == "source" else None


def pick(key: int, names: tuple[str, ...]) -> str:
    """One of ``names`` by weight, chosen by ``key`` (deterministic)."""
    weighted = [n for n in names for _ in range(DOORS[n].weight)]
    return weighted[key % len(weighted)] if weighted else ""


def fits(door: str, program) -> bool:
    """Every door calls a layer of its tensors alone that returns one tensor (generators.returns,
    generators.inputs): a source door's operator (checkpoint, torch.cond, a transform) and a call door's
    outputs take tensors alone; no door takes a program's hooks (generators.autograd)."""
    d = DOORS[door]
    if d.family == "dynamic" and any(b.reuse for b in program.blocks()):
        return False  # a reuse_hash_fn key is a constant: symbolic shapes leave it none
    return program.block.returns == SINGLE and not any(b.takes for b in program.blocks()) \
        and not program.options.autograd and (
        d.fits is None or d.fits(program))


def in_share(key: str, share: float) -> bool:
    """Whether ``key`` (a program id) falls in a fixed ``share`` of keys (a stable hash, not Python's)."""
    import zlib

    return zlib.crc32(key.encode()) % 1000 < share * 1000


def assign(key: str, share: float, names: tuple[str, ...], program=None) -> str:
    """The door a campaign gives the program ``key`` names (a program id):
    none for ``1 - share`` of keys, else one of ``names`` that fits
    ``program`` (if given), by weight; the same for every run of one seed
    and shard (a stable hash, not Python's)."""
    import zlib

    if program is not None:
        names = tuple(n for n in names if fits(n, program))
    return pick(zlib.crc32(key.encode()) // 1000, names) if names and in_share(key, share) else ""


def with_door(program, door: str):
    """``program`` reached through ``door`` ("": plainly), with what the door adds to it and without its
    autograd features (generators.autograd)."""
    from dataclasses import replace

    d = DOORS.get(door)
    if d is not None and d.furnish is not None:
        program = d.furnish(program)
    # a door's own contract says what reaches autograd through it: its program asks for gradients plainly
    autograd = () if door else program.options.autograd
    return replace(program, options=replace(program.options, door=door, autograd=autograd))

