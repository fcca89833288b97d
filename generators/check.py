"""Well-formedness: the checks that make a program valid by construction.

``check`` re-derives every shape of every repeat from the IR alone, so a program
loaded from a file (or hand-edited into a repro) is verified the same way the
strategy built it. It raises ``MalformedProgram`` with the offending statement.
"""

from __future__ import annotations

from .ir import (
    BLOCK_KINDS,
    DTYPES,
    FLOWS,
    STRUCTURES,
    Arg,
    Const,
    MalformedProgram,
    Program,
    Ref,
    Scalar,
    Shape,
    Stmt,
)
from .ops import OPS, D, OpSpec, Reject, S, T, W, broadcast


def operand_value(operand, row: dict[str, Scalar]) -> Scalar:
    if isinstance(operand, Const):
        return operand.value
    if isinstance(operand, Arg):
        if operand.name not in row:
            raise Reject(f"argument {operand.name!r} is not a block argument")
        return row[operand.name]
    raise Reject(f"{operand!r} is not a scalar operand")


def stmt_shape(
    op: OpSpec, stmt: Stmt, scope: dict[str, Shape], row: dict[str, Scalar]
) -> Shape:
    """Output shape of ``stmt`` for one repeat; raises Reject if invalid."""
    if len(stmt.operands) != len(op.slots):
        raise Reject(f"{op.name} takes {len(op.slots)} operands, got {len(stmt.operands)}")
    tensors: list[Shape] = []
    scalars: list[Scalar] = []
    for slot, operand in zip(op.slots, stmt.operands):
        if isinstance(slot, (T, W)):
            if not isinstance(operand, Ref) or operand.name not in scope:
                raise Reject(f"{op.name}: {operand} is not a tensor in scope")
            shape = scope[operand.name]
            if isinstance(slot, T):
                tensors.append(shape)
            elif shape != slot.shape(tensors[0]):
                raise Reject(f"{op.name}: weight {operand.name} has shape {shape}")
        else:
            if isinstance(operand, Ref):
                raise Reject(f"{op.name}: scalar slot got tensor {operand.name}")
            value = operand_value(operand, row)
            if isinstance(slot, S) and value not in slot.choices(tensors[0]):
                raise Reject(f"{op.name}: {value!r} not among {slot.choices(tensors[0])}")
            if isinstance(slot, D):
                if isinstance(operand, Arg) or value != slot.value(tensors[0]):
                    raise Reject(f"{op.name}: derived operand must be {slot.value(tensors[0])!r}")
            scalars.append(value)
    return op.shape(tensors, scalars)


def check(program: Program) -> list[dict[str, Shape]]:
    """Validate ``program``; return the shape of every value, per repeat."""
    b, r = program.block, program.repeat
    if b.kind not in BLOCK_KINDS:
        raise MalformedProgram(f"unknown block kind {b.kind!r}")
    if r.structure not in STRUCTURES:
        raise MalformedProgram(f"unknown repetition structure {r.structure!r}")
    if r.flow not in FLOWS:
        raise MalformedProgram(f"unknown data flow {r.flow!r}")
    if r.count < 1:
        raise MalformedProgram("a program repeats its block at least once")
    if any(len(row) != len(b.args) for row in r.args):
        raise MalformedProgram("every repeat must give a value to every block argument")
    if r.structure == "for_range" and b.args:
        raise MalformedProgram("a for-range loop passes no per-repeat arguments")
    if len(program.inputs) != len(b.inputs):
        raise MalformedProgram("block inputs and program inputs must align")
    for _, spec in (*program.inputs, *b.weights):
        if spec.dtype not in DTYPES or any(d < 0 for d in spec.shape):
            raise MalformedProgram(f"bad tensor spec {spec}")
    names = [*b.inputs, *(n for n, _ in b.weights), *b.args, *(s.out for s in b.body)]
    if len(set(names)) != len(names):
        raise MalformedProgram(f"duplicate names in block: {names}")

    per_repeat = []
    for row_values in r.args:
        row = dict(zip(b.args, row_values))
        scope: dict[str, Shape] = {
            **{n: spec.shape for n, (_, spec) in zip(b.inputs, program.inputs)},
            **{n: spec.shape for n, spec in b.weights},
        }
        for stmt in b.body:
            op = OPS.get(stmt.op)
            if op is None:
                raise MalformedProgram(f"unknown op {stmt.op!r}")
            try:
                scope[stmt.out] = stmt_shape(op, stmt, scope, row)
            except Reject as e:
                raise MalformedProgram(f"{stmt.out} = {stmt.op}(...): {e}") from e
        if b.result not in scope:
            raise MalformedProgram(f"block result {b.result!r} is undefined")
        if r.flow == "chain" and scope[b.result] != scope[b.inputs[0]]:
            raise MalformedProgram(
                f"a chained block must keep its input's shape: {scope[b.result]} != {scope[b.inputs[0]]}"
            )
        per_repeat.append(scope)
    return per_repeat


def broadcasts_to(small: Shape, big: Shape) -> bool:
    try:
        return broadcast(small, big) == big
    except Reject:
        return False
