"""Program IR: a generated program as a plain, JSON-round-trippable value.

A program is one *block* (a helper function or an ``nn.Module`` subclass)
repeated several times by one *repetition structure*. Each repeat passes its
own values for the block's scalar arguments, so the IR alone says which repeats
are semantically identical: that is the ground truth that oracles check the
deduplication pass against. Nothing here imports torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Union

Shape = tuple[int, ...]
# Python values an op argument may take. Tuples stand for tuple literals.
Scalar = Union[int, float, bool, str, None, tuple]

STRUCTURES = ("for_range", "for_values", "calls", "module_list")
FLOWS = ("chain", "fanout")
BLOCK_KINDS = ("function", "module")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "bool")


class MalformedProgram(ValueError):
    """The IR breaks one of its own invariants (a generator bug or a bad file)."""


@dataclass(frozen=True)
class TensorSpec:
    shape: Shape
    dtype: str = "float32"
    requires_grad: bool = False


@dataclass(frozen=True)
class Ref:
    """A tensor already in scope: a block input, weight, or earlier statement."""

    name: str


@dataclass(frozen=True)
class Const:
    """A literal written into the block's source, the same in every repeat."""

    value: Scalar


@dataclass(frozen=True)
class Arg:
    """A block parameter whose value each repeat chooses (``Repeat.args``)."""

    name: str


Operand = Union[Ref, Const, Arg]


@dataclass(frozen=True)
class Stmt:
    out: str
    op: str
    operands: tuple[Operand, ...]


@dataclass(frozen=True)
class Block:
    kind: str  # one of BLOCK_KINDS
    inputs: tuple[str, ...]  # tensor parameters: the carried value, then extra inputs
    weights: tuple[tuple[str, TensorSpec], ...]  # nn.Parameters the block reads
    args: tuple[str, ...]  # scalar parameters, valued per repeat
    body: tuple[Stmt, ...]
    result: str


@dataclass(frozen=True)
class Repeat:
    structure: str  # one of STRUCTURES
    flow: str  # "chain": h = block(h); "fanout": outs.append(block(x))
    args: tuple[tuple[Scalar, ...], ...]  # one row per repeat, aligned with Block.args

    @property
    def count(self) -> int:
        return len(self.args)


@dataclass(frozen=True)
class Program:
    inputs: tuple[tuple[str, TensorSpec], ...]  # first is the carried input
    block: Block
    repeat: Repeat
    seed: int = 0
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def identical_repeats(self) -> list[list[int]]:
        """Groups of repeat indices that compute the same function.

        Two repeats are identical iff every scalar argument has the same type
        and value (``1``, ``1.0`` and ``True`` differ: they trace differently).
        """
        groups: dict[tuple, list[int]] = {}
        for i, row in enumerate(self.repeat.args):
            groups.setdefault(_typed_key(row), []).append(i)
        return list(groups.values())

    def differing_args(self) -> list[str]:
        """Block arguments whose value is not the same in every repeat."""
        return [
            name
            for j, name in enumerate(self.block.args)
            if len({_typed_key(row[j]) for row in self.repeat.args}) > 1
        ]

    def to_json(self) -> str:
        return json.dumps(to_dict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Program:
        return from_dict(json.loads(text))


def _typed_key(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return ("tuple", tuple(_typed_key(v) for v in value))
    return (type(value).__name__, value)


# --- JSON encoding -----------------------------------------------------------
# JSON has no tuples and no operand tags, so both are made explicit.


def _enc_scalar(v: Scalar) -> Any:
    if isinstance(v, tuple):
        return {"tuple": [_enc_scalar(x) for x in v]}
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return {"float": repr(v)}
    return v


def _dec_scalar(v: Any) -> Scalar:
    if isinstance(v, dict):
        if "tuple" in v:
            return tuple(_dec_scalar(x) for x in v["tuple"])
        if "float" in v:
            return float(v["float"])
        raise MalformedProgram(f"unknown scalar encoding {v!r}")
    if isinstance(v, list):
        raise MalformedProgram(f"lists are not scalars: {v!r}")
    return v


def _enc_operand(o: Operand) -> dict:
    if isinstance(o, Ref):
        return {"ref": o.name}
    if isinstance(o, Arg):
        return {"arg": o.name}
    return {"const": _enc_scalar(o.value)}


def _dec_operand(d: dict) -> Operand:
    if not isinstance(d, dict) or len(d) != 1:
        raise MalformedProgram(f"operand must be a one-key object, got {d!r}")
    ((tag, v),) = d.items()
    if tag == "ref":
        return Ref(v)
    if tag == "arg":
        return Arg(v)
    if tag == "const":
        return Const(_dec_scalar(v))
    raise MalformedProgram(f"unknown operand tag {tag!r}")


def _enc_spec(s: TensorSpec) -> dict:
    return {"shape": list(s.shape), "dtype": s.dtype, "requires_grad": s.requires_grad}


def _dec_spec(d: dict) -> TensorSpec:
    return TensorSpec(tuple(d["shape"]), d["dtype"], bool(d["requires_grad"]))


def to_dict(p: Program) -> dict:
    b, r = p.block, p.repeat
    return {
        "inputs": [[n, _enc_spec(s)] for n, s in p.inputs],
        "block": {
            "kind": b.kind,
            "inputs": list(b.inputs),
            "weights": [[n, _enc_spec(s)] for n, s in b.weights],
            "args": list(b.args),
            "body": [
                {"out": s.out, "op": s.op, "operands": [_enc_operand(o) for o in s.operands]}
                for s in b.body
            ],
            "result": b.result,
        },
        "repeat": {
            "structure": r.structure,
            "flow": r.flow,
            "args": [[_enc_scalar(v) for v in row] for row in r.args],
        },
        "seed": p.seed,
        "meta": p.meta,
        # Derived, written for readers of program.json; ignored when loading.
        "identical_repeats": p.identical_repeats(),
    }


def from_dict(d: dict) -> Program:
    try:
        b, r = d["block"], d["repeat"]
        program = Program(
            inputs=tuple((n, _dec_spec(s)) for n, s in d["inputs"]),
            block=Block(
                kind=b["kind"],
                inputs=tuple(b["inputs"]),
                weights=tuple((n, _dec_spec(s)) for n, s in b["weights"]),
                args=tuple(b["args"]),
                body=tuple(
                    Stmt(s["out"], s["op"], tuple(_dec_operand(o) for o in s["operands"]))
                    for s in b["body"]
                ),
                result=b["result"],
            ),
            repeat=Repeat(
                structure=r["structure"],
                flow=r["flow"],
                args=tuple(tuple(_dec_scalar(v) for v in row) for row in r["args"]),
            ),
            seed=int(d.get("seed", 0)),
            meta=dict(d.get("meta", {})),
        )
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, MalformedProgram):
            raise
        raise MalformedProgram(f"not a program: {type(e).__name__}: {e}") from e
    return program
