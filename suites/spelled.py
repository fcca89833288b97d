"""One op statement evaluated in each of its spellings (generators.spellings),
in eager, on operands built from the op's own slots: what the spelling test
compares bit for bit, and what a probe of Dynamo's nodes compiles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from generators.codegen import literal
from generators.ops import OPS, TT, D, Env, OpSpec, Reject, S, T, W, slot_values
from generators.spellings import spelling, template

SHAPES = ((3, 4), (2, 3, 4), (2, 4, 3, 3), (4,), (2, 4, 5))
TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class Case:
    """An op's operands: tensor shapes (``None`` for a Python value) and the
    Python values' sources, with the primary's dtype."""

    op: str
    shapes: tuple
    values: tuple[str, ...]  # literal source per operand ("" for a tensor)
    dtype: str


def cases(op: OpSpec, dtype: str = "float32") -> Iterator[Case]:
    """Operands the op's rule accepts at the first shape that fits: every
    value of each Python slot in turn, the others at their first choice."""
    for shape in SHAPES:
        t = TT(shape, dtype)
        slots = op.slots[1:]
        choices = [slot_values(s, t) if isinstance(s, S) else (s.value(shape),) if isinstance(s, D) else (None,)
                   for s in slots]
        if any(not c for c in choices):
            continue
        rows = [[c[0] for c in choices]]
        for j, c in enumerate(choices):
            rows += [[*[x[0] for x in choices[:j]], v, *[x[0] for x in choices[j + 1:]]] for v in c[1:]]
        found = []
        for row in rows:
            tensors, values, shapes, srcs = [t], [], [shape], [""]
            try:
                for slot, v in zip(slots, row):
                    if isinstance(slot, T):
                        tensors.append(TT(shape, slot.dtypes[0]))
                        shapes.append(shape)
                        srcs.append("")
                    elif isinstance(slot, W):
                        shapes.append(slot.shape(shape))
                        srcs.append("")
                    else:
                        values.append(v)
                        shapes.append(None)
                        srcs.append(literal(v))
                op.rule(tensors, values, Env())
            except (Reject, IndexError, TypeError):
                continue
            found.append(Case(op.name, tuple(shapes), tuple(srcs), dtype))
        if found:
            yield from found
            return


def operands(case: Case, seed: int = 0, grad: bool = False) -> list[torch.Tensor]:
    """Fresh leaf tensors for a case's tensor operands (every call the same values)."""
    g = torch.Generator().manual_seed(seed)
    op = OPS[case.op]
    out = []
    for i, (slot, shape) in enumerate(zip(op.slots, case.shapes)):
        if shape is None:
            continue
        dtype = TORCH_DTYPES[case.dtype] if i == 0 else torch.float32
        if isinstance(slot, T) and i and slot.dtypes[0] != "float32":
            dtype = getattr(torch, slot.dtypes[0])
        t = torch.randn(shape, generator=g).to(dtype)
        out.append(t.requires_grad_(grad and t.is_floating_point()))
    return out


def source(case: Case, kind: str, names: list[str], out: str = "r", instance: str = "mod") -> tuple[list[str], str]:
    """(lines computing ``out``, module constructor source or "") for a case
    spelled ``kind`` ("" the default), its tensor operands named ``names``."""
    op = OPS[case.op]
    it = iter(names)
    srcs = [next(it) if v == "" else v for v in case.values]
    fmt = template(op.fmt, op.name, kind, instance)
    form = spelling(op.name, kind)
    ctor = form.fmt.format(*srcs) if form is not None and form.kind == "module" else ""
    if "{out}" in fmt:
        return fmt.format(*srcs, out=out).split("\n"), ctor
    return [f"{out} = {fmt.format(*srcs)}"], ctor


def evaluate(case: Case, kind: str, tensors: list[torch.Tensor]):
    """The case's result spelled ``kind``, and its tensor operands after
    (an in-place op writes its primary): the operands are clones of
    ``tensors``, so gradients reach them."""
    names = [f"a{i}" for i in range(len(tensors))]
    lines, ctor = source(case, kind, names)
    scope = {"torch": torch, "nn": nn, "F": F, **{n: t.clone() for n, t in zip(names, tensors)}}
    if ctor:
        scope["mod"] = eval(ctor, scope)  # noqa: S307 - catalogue source
    exec("\n".join(lines), scope)  # noqa: S102 - catalogue source
    return scope["r"], [scope[n] for n in names]


def bits(t):
    """A tensor's bits, so -0.0 differs from 0.0 and NaN equals NaN."""
    if not isinstance(t, torch.Tensor):
        return t
    t = t.detach().contiguous()
    if t.is_floating_point():
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def same_bits(a, b) -> bool:
    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return False
    if not isinstance(a, torch.Tensor):
        return a == b
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))
