"""What a region can be given: how its extra tensors arrive (``Block.extras``)
and one more argument beside its tensors (``Block.takes``, valued per repeat
by ``Call.given``).

Both are catalogues read from Python's calling convention, from pytree, and
from how torch's reuse of a ``nested_compile_region`` body fingerprints a
call (torch/_dynamo/variables/invoke_subgraph.py: flat leaves tagged
tensor, symnode, constant or module, behind a treespec; constants compared
with ``!=``; a module's guards re-run under its new source; anything else
makes the call not reusable) and how the dedup pass rewires region inputs.

A pack says how extra tensors travel: one by one, by keyword (in their own
order or another), or inside one container (list, tuple, dict, namedtuple,
dataclass, nested). A take is one more parameter, ``given``, whose variants
a repeat chooses: an optional tensor or None, a module instance (the shared
one, another instance, another class, an instance with its own forward), a
parameter or a plain tensor of the same metadata, a Python value computed
from the call's tensor, a tensor of data-dependent size. The body folds it
into its result with one line. Which variants compute the same function is
Python's rule, written here (``same``): the ground truth. Nothing here
imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

PARAM = "ys"  # the parameter a block receives its packed extra inputs as
CLASS = "Extras"  # the namedtuple or dataclass holding them


@dataclass(frozen=True)
class Pack:
    name: str
    rule: str  # what Python does with it, one line
    packed: bool  # the block receives its extras as one parameter (PARAM)
    call: Callable[[list[tuple[str, str]]], list[str]]  # (parameter, expression) pairs -> call-site items
    unpack: Callable[[list[str]], list[str]]  # the extras' names -> the body's first lines
    define: Callable[[list[str]], list[str]] = lambda names: []  # module-level definitions (of CLASS)
    imports: tuple[str, ...] = ()
    keywords: bool = False  # the call passes tensors by keyword: no Python argument may follow positionally


def _seq(open_: str, close: str) -> Callable[[list[tuple[str, str]]], list[str]]:
    return lambda items: [open_ + ", ".join(e for _, e in items) + ("," if open_ == "(" and len(items) == 1 else "")
                          + close]


def _unpack_seq(names: list[str]) -> list[str]:
    return [f"{', '.join(names)}, = {PARAM}"]


def _fields(names: list[str]) -> list[str]:
    return [f"{n} = {PARAM}.{n}" for n in names]


def _nested(items: list[tuple[str, str]]) -> list[str]:
    first, rest = items[0][1], ", ".join(e for _, e in items[1:])
    return [f"{{'first': ({first},), 'rest': [{rest}]}}"]


def _unpack_nested(names: list[str]) -> list[str]:
    lines = [f"{names[0]}, = {PARAM}['first']"]
    return lines + ([f"{', '.join(names[1:])}, = {PARAM}['rest']"] if names[1:] else [])


PACKS_LIST = (
    Pack("positional", "each extra tensor its own positional argument", False,
         lambda items: [e for _, e in items], lambda names: []),
    Pack("list", "a list of tensors: a pytree node", True, _seq("[", "]"), _unpack_seq),
    Pack("dict", "a dict of tensors by name: a pytree node keyed in insertion order", True,
         lambda items: ["{" + ", ".join(f"{n!r}: {e}" for n, e in items) + "}"],
         lambda names: [f"{n} = {PARAM}[{n!r}]" for n in names]),
    Pack("tuple", "a tuple of tensors: a pytree node", True, _seq("(", ")"), _unpack_seq),
    Pack("namedtuple", "a namedtuple: a pytree node read by field", True,
         lambda items: [f"{CLASS}({', '.join(e for _, e in items)})"], _fields,
         lambda names: [f"{CLASS} = collections.namedtuple({CLASS!r}, {list(names)!r})"], ("collections",)),
    Pack("dataclass", "a plain dataclass: not a pytree node, one opaque leaf", True,
         lambda items: [f"{CLASS}({', '.join(e for _, e in items)})"], _fields,
         lambda names: ["@dataclass", f"class {CLASS}:", *(f"    {n}: torch.Tensor" for n in names)],
         ("dataclasses",)),
    Pack("nested", "a dict holding a tuple and a list: pytree nodes inside a node", True, _nested, _unpack_nested),
    Pack("keyword", "tensors passed by keyword bind by name", False,
         lambda items: [f"{n}={e}" for n, e in items], lambda names: [], keywords=True),
    Pack("keyword_order", "the order keywords are written in binds nothing", False,
         lambda items: [f"{n}={e}" for n, e in reversed(items)], lambda names: [], keywords=True),
)
PACKS: dict[str, Pack] = {p.name: p for p in PACKS_LIST}
EXTRAS = tuple(PACKS)


# --- one more argument: what ``given`` can be ------------------------------------------

GIVEN = "given"  # the parameter's name (keyword at every call, default None)
OMIT = ""  # a variant's expression when the call leaves the argument out
MODULES = "given"  # the Program's ModuleList of given module instances (variant index = position)


@dataclass(frozen=True)
class Take:
    name: str
    rule: str  # Python's rule for the variants, one line
    family: str  # what a planted fault and a signature group it under
    variants: tuple[tuple[str, str], ...]  # (variant, call-site expression over {x}, the call's primary; OMIT: left out)
    use: str  # the line folding ``given`` into the block's result {r}
    same: tuple[tuple[str, ...], ...] = ()  # groups of variants Python computes alike
    sub: str = ""  # the variant a sub-block's caller passes ("": not taken by sub-blocks)
    fullgraph: bool = True  # Dynamo captures the call in one graph (else a break at a data-dependent size)
    carried: bool = False  # its value follows metadata a chain may change from one repeat to the next
    grads: bool = False  # a variant passes a tensor that requires grad (a parameter): autograd refuses out= then

    def expr(self, variant: str, x: str) -> str:
        return dict(self.variants)[variant].format(x=x)

    def computes(self, variant: str) -> str:
        """The variant standing for the group Python computes alike."""
        return next((g[0] for g in self.same if variant in g), variant)


TAKES_LIST = (
    Take("optional", "None, a left-out default and a tensor: the body branches on `is None`", "optional",
         (("none", "None"), ("omitted", OMIT), ("tensor", "{x}.float().mean()")),
         "{r} = {r} if given is None else {r} + given", (("none", "omitted"),), sub="tensor"),
    Take("module", "a module passed in: its class's forward, its own parameters, or a forward set on the instance",
         "module",
         (("shared", f"self.{MODULES}[0]"), ("instance", f"self.{MODULES}[1]"), ("class", f"self.{MODULES}[2]"),
          ("own_forward", f"self.{MODULES}[3]")),
         "{r} = given({r})", grads=True),
    Take("parameter", "an nn.Parameter and a plain tensor of the same metadata and values compute alike",
         "parameter", (("tensor", "self.given_t"), ("parameter", "self.given_p")),
         "{r} = {r} * given", (("tensor", "parameter"),), grads=True),
    Take("size", "a size read at the call site is a Python int (a SymInt under dynamic shapes)", "derived",
         (("numel", "{x}.numel()"),), "{r} = {r} + given * 0.5", sub="numel"),
    Take("dtype", "a dtype read at the call site", "derived", (("dtype", "{x}.dtype"),),
         "{r} = {r} * (0.5 if given.is_floating_point else 2.0)", sub="dtype"),
    Take("requires_grad", "requires_grad read at the call site: a bool that a chain can change", "derived",
         (("requires_grad", "{x}.requires_grad"),), "{r} = {r} * (0.5 if given else 2.0)", sub="requires_grad",
         carried=True),
    Take("contiguous", "is_contiguous() read at the call site: a bool that a chain can change", "derived",
         (("contiguous", "{x}.is_contiguous()"),), "{r} = {r} + (1.0 if given else -1.0)", sub="contiguous",
         carried=True),
    Take("data_dependent", "a tensor whose size depends on the values: boolean indexing, masked_select, nonzero",
         "data_dependent",
         (("index", "{x}[{x} > 0]"), ("masked_select", "torch.masked_select({x}, {x} > 0)"),
          ("nonzero", "{x}.nonzero()")),
         "{r} = {r} + given.sum() * 0.5", (("index", "masked_select"),), sub="index", fullgraph=False),
)
TAKES: dict[str, Take] = {t.name: t for t in TAKES_LIST}
FAMILIES = tuple(dict.fromkeys(t.family for t in TAKES_LIST))

# The module instances the module take passes (MODULES, by variant index): each variant another function.
MODULE_DEFS = (
    "class Given(nn.Module):\n"
    "    def __init__(self, w):\n"
    "        super().__init__()\n"
    "        self.w = nn.Parameter(torch.tensor(w))\n\n"
    "    def forward(self, x):\n"
    "        return torch.tanh(x) * self.w",
    "class GivenOther(nn.Module):\n"
    "    def __init__(self, w):\n"
    "        super().__init__()\n"
    "        self.w = nn.Parameter(torch.tensor(w))\n\n"
    "    def forward(self, x):\n"
    "        return torch.sigmoid(x) * self.w",
    "def given_forward(self, x):\n"
    "    return torch.sin(x) * self.w",
)
MODULE_INIT = (f"self.{MODULES} = nn.ModuleList([Given(0.5), Given(-1.5), GivenOther(0.5), Given(0.5)])",
               f"self.{MODULES}[3].forward = types.MethodType(given_forward, self.{MODULES}[3])")
PARAMETER_INIT = ("self.given_t = torch.tensor(0.75, requires_grad=True)",
                  "self.given_p = nn.Parameter(torch.tensor(0.75))")

