"""Render a program to standalone Python source: a pure function of the IR.

The source defines ``Program`` (an ``nn.Module``) and ``make_inputs()``; it
imports only torch, so it can be pasted into a bug report as it is. Loops stay
loops and helpers stay helpers, so Dynamo traces real bytecode with real line
numbers, which is what the region tracker keys on.
"""

from __future__ import annotations

import math

from .check import check
from .ir import Arg, Const, Program, Ref, Scalar, TensorSpec
from .ops import OPS, render_call

HEADER = """\
import torch
import torch.nn as nn
import torch.nn.functional as F"""


def literal(v: Scalar) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, tuple):
        inner = ", ".join(literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return repr(v)


def _tensor_expr(spec: TensorSpec, scale: str | None = None) -> str:
    shape = ", ".join(map(str, spec.shape))
    expr = f"torch.randn({shape}, dtype=torch.{spec.dtype})"
    if scale == "fan_in":
        expr += f" / {spec.shape[-1] if spec.shape else 1} ** 0.5"
    elif scale == "small":
        expr += " * 0.1"
    return expr


def _weight_line(program: Program, name: str, spec: TensorSpec) -> str:
    return f"        self.{name} = nn.Parameter({_tensor_expr(spec, _weight_scale(program, name))})"


def _weight_scale(program: Program, name: str) -> str:
    for stmt in program.block.body:
        op = OPS[stmt.op]
        for slot, operand in zip(op.slots, stmt.operands):
            if isinstance(operand, Ref) and operand.name == name and hasattr(slot, "scale"):
                return slot.scale
    return "fan_in"


def _args_are_attributes(program: Program) -> bool:
    """Module blocks keep per-repeat scalars as attributes, one instance per
    repeat, except in a loop over values, which calls one shared instance."""
    return program.block.kind == "module" and program.repeat.structure != "for_values"


def _render_block(program: Program) -> list[str]:
    b = program.block
    module = b.kind == "module"
    attrs = _args_are_attributes(program)
    weight_names = {n for n, _ in b.weights}

    def operand(o) -> str:
        if isinstance(o, Const):
            return literal(o.value)
        if isinstance(o, Arg):
            return f"self.{o.name}" if attrs else o.name
        return f"self.{o.name}" if module and o.name in weight_names else o.name

    body = [
        f"        {s.out} = {render_call(OPS[s.op], [operand(o) for o in s.operands])}"
        for s in b.body
    ]
    body.append(f"        return {b.result}")

    if not module:
        params = [*b.inputs, *(n for n, _ in b.weights), *b.args]
        return [f"def block({', '.join(params)}):", *(line[4:] for line in body)]

    init_params = "".join(f", {a}" for a in b.args) if attrs else ""
    lines = ["class Block(nn.Module):", f"    def __init__(self{init_params}):", "        super().__init__()"]
    for name, spec in b.weights:
        lines.append(_weight_line(program, name, spec))
    if attrs:
        lines += [f"        self.{a} = {a}" for a in b.args]
    fwd_params = [*b.inputs, *([] if attrs else b.args)]
    lines += ["", f"    def forward(self, {', '.join(fwd_params)}):", *body]
    return lines


def _render_forward(program: Program) -> list[str]:
    b, r = program.block, program.repeat
    attrs = _args_are_attributes(program)
    names = [n for n, _ in program.inputs]
    extras = names[1:]
    chain = r.flow == "chain"
    first = "h" if chain else names[0]

    def call(callee: str, scalars: list[str]) -> str:
        tensor_args = [first, *extras]
        if b.kind == "function":
            tensor_args += [f"self.{n}" for n, _ in b.weights]
        return f"{callee}({', '.join(tensor_args + scalars)})"

    def emit(expr: str, i: int | None) -> str:
        if chain:
            return f"h = {expr}"
        return f"outs.append({expr})" if i is None else f"o{i} = {expr}"

    lines = [f"    def forward(self, {', '.join(names)}):"]
    if chain:
        lines.append(f"        h = {names[0]}")
    elif r.structure != "calls":
        lines.append("        outs = []")

    callee = "block" if b.kind == "function" else None
    if r.structure == "for_range":
        body = call(callee or "self.blocks[i]", [])
        lines += [f"        for i in range({r.count}):", f"            {emit(body, None)}"]
    elif r.structure == "module_list":
        lines += ["        for blk in self.blocks:", f"            {emit(call('blk', []), None)}"]
    elif r.structure == "for_values":
        loop_vars = ", ".join(b.args) if b.args else "_"
        rows = ", ".join(literal(row[0]) if len(row) == 1 else literal(tuple(row)) for row in r.args)
        lines.append(f"        for {loop_vars} in [{rows}]:")
        lines.append(f"            {emit(call(callee or 'self.block', list(b.args)), None)}")
    else:  # calls: one source line per repeat
        for i, row in enumerate(r.args):
            c = callee or f"self.blocks[{i}]"
            lines.append(f"        {emit(call(c, [] if attrs else [literal(v) for v in row]), i)}")

    if chain:
        lines.append("        return h")
    elif r.structure == "calls":
        lines.append(f"        return ({''.join(f'o{i}, ' for i in range(r.count))})")
    else:
        lines.append("        return tuple(outs)")
    return lines


def _render_program(program: Program) -> list[str]:
    b, r = program.block, program.repeat
    lines = ["class Program(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    if b.kind == "function":
        for name, spec in b.weights:
            lines.append(_weight_line(program, name, spec))
    elif r.structure == "for_values":
        lines.append("        self.block = Block()")
    else:
        ctor = [f"Block({', '.join(literal(v) for v in row)})" for row in r.args]
        lines.append(f"        self.blocks = nn.ModuleList([{', '.join(ctor)}])")
    if len(lines) == 3:
        lines.append("        pass")
    return lines + [""] + _render_forward(program)


def _render_inputs(program: Program) -> list[str]:
    lines = ["def make_inputs():", "    return ["]
    for _, spec in program.inputs:
        lines.append(f"        {_tensor_expr(spec)}.requires_grad_({spec.requires_grad}),")
    return lines + ["    ]"]


def render(program: Program) -> str:
    """Python source for ``program``; raises MalformedProgram if it is invalid."""
    check(program)
    parts = [
        HEADER,
        "\n".join(_render_block(program)),
        "\n".join(_render_program(program)),
        "\n".join(_render_inputs(program)),
    ]
    return "\n\n\n".join(parts) + "\n"
