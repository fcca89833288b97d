"""Call-site forms: the ways Python lets one call of a block be written that
the plain ``callee(tensors..., args...)`` is not (``Call.how``).

One entry per form, as data: what Python's rule says the form computes
(``same``: the function the plain call computes, with the arguments bound
as the plain call binds them; otherwise a call Python calls different, so
it joins the repeat's ground-truth key), which block kinds it applies to,
and how it is written. A form reaches the callee through another door
(keywords in another order, ``*args``, ``functools.partial``, a wrapper, a
bound or unbound method, a subclass instance): torch must see through each
to the function it calls, and bind what the call binds. Nothing here
imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Site:
    """One call as ``generators.codegen`` writes it: the callee, its tensor
    arguments, the Python arguments as (parameter, source) pairs, and the
    keywords every form passes as they are (free values the forward takes)."""

    callee: str
    tensors: tuple[str, ...]
    args: tuple[tuple[str, str], ...]
    passed: tuple[str, ...] = ()

    def plain(self, callee: str | None = None, first: tuple[str, ...] = ()) -> str:
        items = [*first, *self.tensors, *(v for _, v in self.args), *self.passed]
        return f"{callee or self.callee}({', '.join(items)})"

    def keywords(self, order: int = 1) -> list[str]:
        return [f"{n}={v}" for n, v in self.args][::order]


def _join(*parts) -> str:
    return ", ".join(p for part in parts for p in part)


@dataclass(frozen=True)
class Form:
    name: str
    rule: str  # what Python says the form does, one line
    same: bool  # computes what the plain call computes (else a different call by Python's rules)
    kinds: tuple[str, ...]  # block kinds it applies to
    write: Callable[[Site], str]
    min_args: int = 0  # Python arguments the form needs
    binds: bool = True  # rewrites how Python arguments are passed: needs them at the call (no pack, no attributes)
    init: str = ""  # module blocks: how the call's instance is built instead (see codegen)
    prelude: tuple[str, ...] = ()  # names of PRELUDE definitions it uses
    imports: tuple[str, ...] = ()
    carries: bool = False  # the call returns another type, which a chain carries to the later calls


FORMS_LIST = (
    Form("bind:keyword", "keyword arguments bind by name: the same binding as positional",
         True, ("function", "module"), lambda s: f"{s.callee}({_join(s.tensors, s.keywords(), s.passed)})",
         min_args=1),
    Form("bind:keyword_order", "the order keywords are written in binds nothing",
         True, ("function", "module"), lambda s: f"{s.callee}({_join(s.tensors, s.keywords(-1), s.passed)})",
         min_args=2),
    Form("bind:star_args", "f(*seq) binds the items of seq positionally",
         True, ("function", "module"),
         lambda s: f"{s.callee}({_join(s.tensors, ['*(' + ''.join(v + ', ' for _, v in s.args) + ')'], s.passed)})",
         min_args=1),
    Form("bind:star_kwargs", "f(**mapping) binds the mapping's items by name",
         True, ("function", "module"),
         lambda s: f"{s.callee}({_join(s.tensors, ['**{' + ', '.join(f'{n!r}: {v}' for n, v in s.args) + '}'], s.passed)})",
         min_args=1),
    Form("bind:default", "an argument left out takes the parameter's default: the same value as passing it",
         True, ("function", "module"),
         lambda s: f"{s.callee}({_join(s.tensors, [v for _, v in s.args[:-1]], s.passed)})",
         min_args=1),
    Form("reach:partial", "functools.partial(f, k=v)(...) calls f with k=v bound by name",
         True, ("function", "module"),
         lambda s: (f"functools.partial({s.callee}, {s.keywords()[0]})({_join(s.tensors, s.keywords()[1:], s.passed)})"
                    if s.args else f"functools.partial({s.callee})({_join(s.tensors, s.passed)})"),
         imports=("functools",), binds=False),
    Form("reach:wrapper", "a functools.wraps wrapper calls the function it wraps",
         True, ("function", "module"), lambda s: s.plain(f"passthrough({s.callee})"), prelude=("passthrough",),
         imports=("functools",), binds=False),
    Form("reach:lambda", "a lambda forwarding *args and **kwargs calls its target",
         True, ("function", "module"), lambda s: s.plain(f"(lambda *a, **k: {s.callee}(*a, **k))"), binds=False),
    Form("reach:method", "module(x) calls the bound method module.forward(x)",
         True, ("module",), lambda s: s.plain(f"{s.callee}.forward"), binds=False),
    Form("reach:unbound", "type(m).forward(m, x) is the bound call m.forward(x)",
         True, ("module",), lambda s: s.plain(f"type({s.callee}).forward", (s.callee,)), binds=False),
    Form("object:subclass_instance", "an instance of a subclass that overrides nothing runs the inherited forward",
         True, ("module",), lambda s: s.plain(), init="subclass", prelude=("BlockSub",), binds=False),
    Form("object:method_on_instance", "a forward set on the instance shadows the class's: here the same function",
         True, ("module",), lambda s: s.plain(), init="method", imports=("types",), binds=False),
    Form("type:tensor_subclass", "a torch.Tensor subclass instance is another type: results keep the subclass",
         False, ("function", "module"),
         lambda s: f"{s.callee}({_join([s.tensors[0] + '.as_subclass(TensorSub)'], s.tensors[1:], [v for _, v in s.args], s.passed)})",
         binds=False, prelude=("TensorSub",), carries=True),
)
FORMS: dict[str, Form] = {f.name: f for f in FORMS_LIST}

# Definitions a form's call needs, written once at the top of the program.
PRELUDE: dict[str, str] = {
    "passthrough": ("def passthrough(fn):\n"
                    "    @functools.wraps(fn)\n"
                    "    def wrapper(*args, **kwargs):\n"
                    "        return fn(*args, **kwargs)\n\n"
                    "    return wrapper"),
    "TensorSub": "class TensorSub(torch.Tensor):\n    pass",
    "BlockSub": "",  # written after Block (codegen), as it subclasses it
}


def applies(form: Form, kind: str, nargs: int, at_call: bool) -> bool:
    """Whether ``form`` can be written for a block of ``kind`` taking
    ``nargs`` Python arguments, passed at the call site (``at_call``) or not."""
    return kind in form.kinds and (nargs >= form.min_args and at_call if form.binds else True)
