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


def _ckpt(reentrant: str, extra: str = "") -> Writer:
    return lambda fn, t: f"torch.utils.checkpoint.checkpoint({fn}, {t}, use_reentrant={reentrant}{extra})"


SELECTIVE = (", context_fn=functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts, "
             "[torch.ops.aten.mm.default, torch.ops.aten.sin.default])")

DOORS_LIST = (
    Door("transform:grad", "transform", "torch.func.grad of the summed outputs equals autograd's gradient", "call",
         backward=False),
    Door("transform:vjp", "transform", "torch.func.vjp returns the outputs and the vector-Jacobian product", "call",
         backward=False),
    Door("transform:jacrev", "transform", "torch.func.jacrev computes the Jacobian row by row", "call",
         backward=False, weight=2),
    Door("transform:vmap", "transform", "torch.func.vmap over a batch computes each sample as the unbatched call",
         "call"),
    Door("transform:functional_call", "transform",
         "torch.func.functional_call runs the module with the given parameters in place of its own", "call"),
    Door("transform:vmap_each", "transform", "torch.func.vmap around each block call maps it over the leading dim",
         "source", write=lambda fn, t: f"torch.func.vmap({fn})({t})"),
    Door("checkpoint:non_reentrant", "checkpoint", "checkpointing recomputes, never changes, values and gradients",
         "source", write=_ckpt("False")),
    # Reentrant checkpointing of a call whose inputs need no gradient is
    # documented as unsupported (its parameters get none in eager): the door
    # checkpoints only calls whose input requires grad, as its contract says.
    Door("checkpoint:reentrant", "checkpoint", "reentrant checkpointing recomputes in backward: the same values",
         "source", write=lambda fn, t: f"({_ckpt('True')(fn, t)} if {t}.requires_grad else ({fn})({t}))"),
    Door("checkpoint:selective", "checkpoint", "selective checkpointing saves what the policy names, recomputes the rest",
         "source", write=_ckpt("False", SELECTIVE), imports=("functools",)),
    Door("control_flow:cond", "control_flow", "torch.cond runs the branch its predicate picks",
         "source",
         write=lambda fn, t: f"torch.cond({t}.sum() > 0, {fn}, lambda _u: ({fn})(_u * 0.5), ({t},))",
         reference=lambda fn, t: f"(({fn})({t}) if {t}.sum() > 0 else ({fn})({t} * 0.5))"),
    Door("control_flow:while_loop", "control_flow", "while_loop runs its body while the condition holds",
         "source",
         write=lambda fn, t: (f"torch._higher_order_ops.while_loop(lambda _i, _u: _i < 2, "
                              f"lambda _i, _u: (_i + 1, ({fn})(_u)), (torch.zeros((), dtype=torch.int64), {t}))[1]"),
         reference=lambda fn, t: f"({fn})(({fn})({t}))"),
    Door("control_flow:map", "control_flow", "map applies its body to each slice of the leading dim and stacks",
         "source",
         write=lambda fn, t: f"torch._higher_order_ops.map({fn}, {t})",
         reference=lambda fn, t: f"torch.stack([({fn})(_r) for _r in {t}.unbind(0)])"),
    Door("control_flow:scan", "control_flow", "scan carries a value through its body over the leading dim",
         "source",
         write=lambda fn, t: (f"torch._higher_order_ops.scan(lambda _c, _r: scan_step({fn}, _c, _r), "
                              f"torch.zeros_like({t}[0]), {t})[1]"),
         reference=lambda fn, t: f"scan_reference({fn}, {t})", prelude=("scan_step",)),
    Door("export:strict", "export", "torch.export (strict) runs what eager runs", "call", weight=3),
    Door("export:non_strict", "export", "torch.export (non-strict) runs what eager runs", "call", weight=3),
    Door("export:unflatten", "export", "the unflattened exported program runs what eager runs", "call", weight=2),
    Door("export:compile", "export", "torch.compile of the exported module runs what eager runs", "call", weight=2),
    Door("cache:warm", "cache", "a compile served by the FX graph and AOTAutograd caches computes what the cold one did",
         "call", weight=1, inductor=True),
    Door("dynamic:dynamic", "dynamic", "dynamic=True compiles one graph for every batch size", "call", resize=True),
    Door("dynamic:mark", "dynamic", "mark_dynamic keeps the batch dimension symbolic", "call", resize=True),
    Door("dynamic:maybe_mark", "dynamic", "maybe_mark_dynamic lets the batch dimension be symbolic", "call",
         resize=True),
    Door("dynamic:unbacked", "dynamic", "data-dependent sizes and captured scalars stay symbolic (unbacked)", "call",
         resize=True),
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


def assign(key: str, share: float, names: tuple[str, ...]) -> str:
    """The door a campaign gives the program ``key`` names (a program id):
    none for ``1 - share`` of keys, else one of ``names`` by weight; the same
    for every run of one seed and shard (a stable hash, not Python's)."""
    import zlib

    h = zlib.crc32(key.encode())
    return pick(h // 1000, names) if names and (h % 1000) < share * 1000 else ""


def with_door(program, door: str):
    """``program`` reached through ``door`` ("": plainly)."""
    from dataclasses import replace

    return replace(program, options=replace(program.options, door=door))
