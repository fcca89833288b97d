"""A program's source as short as a hand-written repro: what upstream receives.

The generator renders every program in one general form (a ``Program``
module, an ``__init__`` even where it holds nothing, a ``make_inputs`` that
takes a device, every import a program might use). A bug report needs none of
that where the program does not: an ``__init__`` that holds nothing goes, a
module with no state becomes a function, the inputs become one list
expression, unused imports go, and one blank line separates definitions.
Pure text in, text out: ``reports.upstream.minimal_repro`` renders the short
repro from it, and ``suites/test_upstream.py`` runs each one (nightly) to show
the short form still reproduces.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

EMPTY_INIT = r"    def __init__\(self\):\n        super\(\).__init__\(\)\n(?:        pass\n)?\n"  # holds nothing
MODULE_IMPORTS = {"import torch.nn as nn": "nn", "import torch.nn.functional as F": "F"}


@dataclass(frozen=True)
class Compact:
    imports: tuple[str, ...]  # the import lines the program still uses
    body: str  # its definitions, Program (or program) and make_inputs' replacement excluded when inlined
    model: str  # the expression that makes the model: "Program()" or the function's name
    module: bool  # whether the model stays an nn.Module (its parameters' gradients and buffers are compared)
    inputs: str  # the expression that makes the inputs: a list, or "make_inputs()"

    @property
    def args(self) -> str:
        """The inputs written as a call's arguments."""
        return self.inputs[1:-1] if self.inputs.startswith("[") else f"*{self.inputs}"


def compact(source: str, function: bool = True, inline: bool = True) -> Compact:
    """``source``: ``generators.codegen.render``'s output; ``function``: a stateless module may become one;
    ``inline``: ``make_inputs`` may become a list expression."""
    lines = source.rstrip("\n").splitlines()
    n = next((i for i, l in enumerate(lines) if l.strip() and not l.startswith(("import ", "from "))), len(lines))
    imports, body = [l for l in lines[:n] if l.strip()], "\n".join(lines[n:]).strip("\n") + "\n"
    body = re.sub(r"(class \w+\(nn\.Module\):\n)" + EMPTY_INIT, r"\1", body)
    body, module = _as_function(body) if function else (body, True)
    body, inputs = _inline_inputs(body) if inline else (body, "make_inputs()")
    body = re.sub(r"\n{3,}", "\n\n", body).strip("\n")
    used = {n.id for n in ast.walk(ast.parse(body)) if isinstance(n, ast.Name)} if body else set()
    kept = tuple(l for l in imports if MODULE_IMPORTS.get(l, "") in used or l not in MODULE_IMPORTS)
    return Compact(kept, body, "Program()" if module else "program", module, inputs)


def _as_function(body: str) -> tuple[str, bool]:
    """A ``Program`` holding nothing but ``forward`` (no ``self`` used) as ``def program``."""
    tree = ast.parse(body)
    cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Program"), None)
    if cls is None or len(cls.body) != 1 or not isinstance(cls.body[0], ast.FunctionDef) or cls.decorator_list:
        return body, True
    forward = cls.body[0]
    if forward.name != "forward" or forward.decorator_list or not forward.args.args:
        return body, True
    if any(isinstance(n, ast.Name) and n.id == "self" for s in forward.body for n in ast.walk(s)):
        return body, True
    lines = body.splitlines()
    start, end = cls.lineno - 1, cls.end_lineno
    head = lines[forward.lineno - 1].strip()
    new_head = re.sub(r"^def forward\(self,?\s*", "def program(", head)
    out = [new_head] + [l[4:] for l in lines[forward.lineno:end]]
    return "\n".join(lines[:start] + out + lines[end:]) + "\n", False


def _inline_inputs(body: str) -> tuple[str, str]:
    """``make_inputs`` of plain assignments and ``return [names]`` as one list expression."""
    tree = ast.parse(body)
    fn = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "make_inputs"), None)
    if fn is None:
        return body, "make_inputs()"
    lines = body.splitlines()
    *assigns, ret = fn.body
    values: dict[str, str] = {}
    for a in assigns:
        if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)):
            return body, "make_inputs()"
        values[a.targets[0].id] = ast.get_source_segment(body, a.value)
    if not (isinstance(ret, ast.Return) and isinstance(ret.value, ast.List)
            and [e.id for e in ret.value.elts if isinstance(e, ast.Name)] == list(values)):
        return body, "make_inputs()"
    exprs = [v.replace(", device=device", "").replace(", dtype=torch.float32", "").replace(".requires_grad_(False)", "")
             for v in values.values()]
    rest = lines[:fn.lineno - 1 - len(fn.decorator_list)] + lines[fn.end_lineno:]
    return "\n".join(rest) + "\n", "[" + ", ".join(exprs) + "]"
