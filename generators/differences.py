"""Every way two calls of one Python function can differ, from Python's side.

One entry per difference, as data: its family (how the arguments bind, the
type of a value beyond its value, the objects the call reaches, Python values
derived from tensors, state read during the call, the tensors themselves),
Python's rule for it, its ground truth (``same``: Python runs the same
function on the same values; ``different``: Python calls them different,
however ``==`` compares the values; ``values``: it depends on the values the
two calls see, which the program's ground-truth key decides), the variation
that takes it away (``Program.variations``, for triage and the reducer), and
the changes between calls of the compiled function that realise it
(``generators.variants`` kinds, as patterns).

The catalogue was written from Python's semantics, not from what torch checks
today: torch's reuse of a ``nested_compile_region`` body keys on the code
object and compares constants with ``==`` (variables/invoke_subgraph.py),
its guards compare floats with ``==`` and skip what has no source, and the
region tracker hashes what the FX graph shows; each of those is a way two
calls Python tells apart can look alike. ``reached(program)`` says, per
entry, which repeats of a drawn program show the difference (against the
program's first repeat) and with which outcome, so coverage is counted by
meaning, not by code path. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Callable, Optional

from .check import PER_INSTANCE
from .forms import FORMS, FORMS_LIST
from .ir import Call, Program, ambient_state, typed_key
from .values import PyList, Sub, base_value

FAMILIES = ("binding", "reach", "object", "type", "tensor", "derived", "state")
TRUTHS = ("same", "different", "values")
WHERE = ("region", "dedup", "calls")  # a nested_compile_region body, a deduplicated region, between compiled calls
OUTCOMES = ("same", "different")

Rows = list[tuple[int, Call]]  # (repeat index in execution order, call)


@dataclass(frozen=True)
class Difference:
    name: str
    family: str
    rule: str  # Python's rule, one line
    truth: str  # one of TRUTHS
    variation: str  # the Program.variations kind (prefix) whose removal takes it away
    shows: Callable[[Program, Rows], list[int]]  # repeat indices where it shows against the first repeat
    between_calls: tuple[str, ...] = ()  # generators.variants kinds (fnmatch patterns) that realise it
    needs: Optional[Callable[[Program], bool]] = None  # what a program must hold for a change between calls to count


# -- how each kind of difference shows in a program ------------------------------


def _form(name: str) -> Callable[[Program, Rows], list[int]]:
    return lambda p, rows: [i for i, c in rows if c.how == name]


def _keywords(p: Program, rows: Rows) -> list[int]:
    keyword_rows = {id(c) for s in p.sections if s.keywords for c in s.calls}
    return [i for i, c in rows if c.how == "bind:keyword" or (id(c) in keyword_rows and p.block.args)]


def _type_pair(a, b) -> str:
    """The type entry two ``==``-equal values of different types fall under."""
    kinds = {type(a), type(b)}
    if isinstance(a, Sub) or isinstance(b, Sub):
        return "type:number_subclass"
    if bool in kinds:
        return "type:bool_number"
    if kinds == {int, float}:
        return "type:int_float"
    if kinds == {tuple, PyList}:
        return "type:tuple_list"
    return ""


def _equal_but_typed(x, y) -> bool:
    bx, by = base_value(x), base_value(y)
    if isinstance(bx, PyList):
        bx = tuple(bx.items)
    if isinstance(by, PyList):
        by = tuple(by.items)
    try:
        return bx == by and typed_key(x) != typed_key(y)
    except TypeError:
        return False


def _retyped(name: str) -> Callable[[Program, Rows], list[int]]:
    def shows(p: Program, rows: Rows) -> list[int]:
        first = rows[0][1]
        out = []
        for i, c in rows[1:]:
            pairs = list(zip(first.args, c.args))
            pairs += [(dict(first.sets)[n], v) for n, v in c.sets if n in dict(first.sets)]
            if any(_equal_but_typed(a, b) and _type_pair(a, b) == name for a, b in pairs):
                out.append(i)
        return out

    return shows


def _later(condition: Callable[[Program], bool]) -> Callable[[Program, Rows], list[int]]:
    """Every repeat after the first, in a program the condition holds for."""
    return lambda p, rows: [i for i, _ in rows[1:]] if condition(p) else []


def _per_instance(p: Program) -> bool:
    return any(s.structure in PER_INSTANCE and len(s.calls) > 1 for s in p.sections)


def _reads(*ops: str) -> Callable[[Program], bool]:
    return lambda p: any(s.op in ops for b in p.blocks() for s in b.body)


def _differs(key: Callable[[Call], object]) -> Callable[[Program, Rows], list[int]]:
    def shows(p: Program, rows: Rows) -> list[int]:
        first = key(rows[0][1])
        return [i for i, c in rows[1:] if repr(key(c)) != repr(first)]

    return shows


def _either(*parts: Callable[[Program, Rows], list[int]]) -> Callable[[Program, Rows], list[int]]:
    return lambda p, rows: sorted({i for part in parts for i in part(p, rows)})


def _tensor(attr: str) -> Callable[[Program, Rows], list[int]]:
    def key(p: Program) -> Callable[[Call], object]:
        specs = dict(p.inputs)
        return lambda c: getattr(specs.get(c.tensor), attr, None) if c.tensor else None

    return lambda p, rows: _differs(key(p))(p, rows)


def _set_in(home: str) -> Callable[[Program, Rows], list[int]]:
    def shows(p: Program, rows: Rows) -> list[int]:
        names = {f.name for f in p.frees if f.home == home}
        return _differs(lambda c: sorted((n, typed_key(v)) for n, v in c.sets if n in names))(p, rows)

    return shows


def _written(p: Program, rows: Rows) -> list[int]:
    written = {id(c) for s in p.sections if s.write for c in s.calls}
    return [i for i, c in rows[1:] if id(c) in written]


def _ambient(field: str) -> Callable[[Program, Rows], list[int]]:
    return _differs(lambda c: ambient_state(c.context)[field])


# -- the catalogue ------------------------------------------------------------------

SHAPE_READS = ("shape_branch", "size_arg", "ndim_arg", "numel_arg")
LAYOUT_READS = ("contiguous_branch", "stride_branch")
TYPE_READS = ("type_is_int", "isinstance_float", "isinstance_tuple")
_FORM_FAMILY = {"bind": "binding", "reach": "reach", "object": "object", "type": "type"}

DIFFERENCES: tuple[Difference, ...] = (
    *(Difference(f.name, _FORM_FAMILY[f.name.split(":")[0]], f.rule, "same" if f.same else "different",
                 f"how:{f.name}", _keywords if f.name == "bind:keyword" else _form(f.name))
      for f in FORMS_LIST),
    # the objects a call reaches
    Difference("object:closure_cells", "object", "functions one factory made hold their own closure cells",
               "values", "arg:", _later(lambda p: p.block.kind == "function" and p.block.attrs),
               ("closure:remake", "attr:closure*", "free:closure*")),
    Difference("object:instance_attrs", "object", "instances of one class hold their own attributes",
               "values", "arg:", _later(lambda p: p.block.kind == "module" and p.block.attrs and _per_instance(p)),
               ("attr:instance*", "attr:training")),
    Difference("object:instances", "object", "another instance of one class: the same code, its own parameters",
               "values", "frozen", _later(lambda p: p.block.kind == "module" and not p.block.attrs and _per_instance(p)),
               ("module:replace:*", "module:load_state_dict", "param:*")),
    Difference("object:packed_fields", "object", "fields read from an object passed in: each call's own object",
               "values", "arg:", _later(lambda p: bool(p.block.pack)), ("object:pack:*",)),
    Difference("object:callable_value", "object", "a callable passed as a value: the same code calls another function",
               "values", "arg:callable", _differs(lambda c: [typed_key(v) for v in c.args if type(v).__name__ == "Fn"]),
               ("*:callable",)),
    # equal values of other types
    Difference("type:int_float", "type", "2 == 2.0, yet int and float are different types", "different", "arg:",
               _retyped("type:int_float"), ("*:type",)),
    Difference("type:bool_number", "type", "True == 1 == 1.0, yet bool is its own type", "different", "arg:",
               _retyped("type:bool_number"), ("*:type",)),
    Difference("type:number_subclass", "type", "an int or float subclass instance equals its value, of another type",
               "different", "arg:", _retyped("type:number_subclass")),
    Difference("type:tuple_list", "type", "(1, 2) != [1, 2]: a tuple and a list of equal items", "different", "arg:",
               _retyped("type:tuple_list"), ("*:type",)),
    # the tensors a call is given
    Difference("tensor:shape", "tensor", "tensors of other shapes", "values", "tensor:shape", _tensor("shape"),
               ("input:shape", "input:rank")),
    Difference("tensor:dtype", "tensor", "tensors of other dtypes", "values", "tensor:dtype", _tensor("dtype"),
               ("input:dtype",)),
    Difference("tensor:layout", "tensor", "the same values laid out with other strides, or a view",
               "values", "tensor:", _either(_tensor("layout"), _differs(lambda c: c.view)), ("input:layout",)),
    Difference("tensor:requires_grad", "tensor", "a tensor that requires grad and one that does not",
               "values", "tensor:requires_grad", _tensor("requires_grad"), ("input:requires_grad", "param:requires_grad")),
    Difference("tensor:frozen_params", "tensor", "a module whose parameters do not require grad",
               "values", "frozen", _differs(lambda c: c.frozen), ("param:requires_grad",)),
    Difference("tensor:alias", "tensor", "two arguments that are one tensor, or a view of it", "values", "alias",
               _differs(lambda c: c.alias), ("input:alias:*",)),
    # Python values the body derives from tensors, and Python types it reads
    Difference("derived:shape", "derived", "sizes read into Python control flow or arguments", "values", "tensor:shape",
               _later(_reads(*SHAPE_READS)), ("input:shape", "input:rank"), _reads(*SHAPE_READS)),
    Difference("derived:dtype", "derived", "a dtype read into Python control flow", "values", "tensor:dtype",
               _later(_reads("dtype_branch")), ("input:dtype",), _reads("dtype_branch")),
    Difference("derived:layout", "derived", "contiguity or strides read into Python control flow", "values",
               "tensor:", _later(_reads(*LAYOUT_READS)), ("input:layout",), _reads(*LAYOUT_READS)),
    Difference("derived:requires_grad", "derived", "requires_grad read into Python control flow", "values",
               "tensor:requires_grad", _later(_reads("requires_grad_branch")), ("input:requires_grad",),
               _reads("requires_grad_branch")),
    Difference("derived:python_type", "derived", "type() or isinstance() of an argument read into control flow",
               "values", "arg:", _later(_reads(*TYPE_READS)), ("*:type",), _reads(*TYPE_READS)),
    # state read during the call
    Difference("state:grad_mode", "state", "grad mode read by autograd or by torch.is_grad_enabled()", "values",
               "context:grad", _either(_ambient("grad"), _later(_reads("grad_enabled_branch"))), ("state:grad",)),
    Difference("state:inference_mode", "state", "inference mode", "values", "context:inference",
               _ambient("inference"), ("state:inference",)),
    Difference("state:autocast", "state", "autocast state", "values", "context:autocast", _ambient("autocast"),
               ("state:autocast",)),
    Difference("state:default_dtype", "state", "the default dtype factory calls and get_default_dtype() read",
               "values", "context:default_dtype",
               _either(_ambient("default_dtype"), _later(_reads("default_dtype_branch"))), ("state:default_dtype",)),
    *(Difference(f"state:{home}", "state", f"a value read from a {home.replace('_', ' ')} rebound between calls",
                 "values", f"set:{home}", _set_in(home), (f"free:{home}*", f"object:{home}*"))
      for home in ("global", "class_attr", "dataclass", "namespace", "dict")),
    Difference("state:input_written", "state", "a tensor written in place between calls", "values", "",
               _written, ("input:values", "param:mutate")),
)
BY_NAME: dict[str, Difference] = {d.name: d for d in DIFFERENCES}
assert len(BY_NAME) == len(DIFFERENCES), "catalogue names must be unique"
assert all(d.family in FAMILIES and d.truth in TRUTHS for d in DIFFERENCES)


def where(program: Program) -> str:
    """Where a repeat's difference meets torch's reuse: a nested_compile_region
    body, or the regions the deduplication pass compares."""
    return "region" if any(b.compile_region for b in program.blocks()) else "dedup"


def reached(program: Program) -> dict[str, dict[str, int]]:
    """Per entry the program shows: ``{"<where>:<outcome>": repeats}``,
    outcome by the program's ground truth against its first repeat."""
    rows = [(i, c) for i, (_, c) in enumerate(program.repeats())]
    if len(rows) < 2:
        return {}
    keys = program.repeat_keys()
    place = where(program)
    out: dict[str, dict[str, int]] = {}
    for d in DIFFERENCES:
        for i in d.shows(program, rows):
            outcome = "same" if keys[i] == keys[0] else "different"
            counts = out.setdefault(d.name, {})
            counts[f"{place}:{outcome}"] = counts.get(f"{place}:{outcome}", 0) + 1
    return out


def between_calls(program: Program, kinds) -> dict[str, dict[str, int]]:
    """Per entry, the changes between compiled calls (variant kinds) that realise it."""
    out: dict[str, dict[str, int]] = {}
    entries = [d for d in DIFFERENCES if d.between_calls and (d.needs is None or d.needs(program))]
    for kind in kinds:
        for d in entries:
            if any(fnmatchcase(kind, pattern) for pattern in d.between_calls):
                counts = out.setdefault(d.name, {})
                counts["calls:different"] = counts.get("calls:different", 0) + 1
    return out


def names(program: Program) -> list[str]:
    """The catalogue entries a program shows between its repeats, in catalogue order."""
    found = reached(program)
    return [d.name for d in DIFFERENCES if d.name in found]


assert set(FORMS) <= set(BY_NAME)


def coverage(program: Program, changed: list[str] = ()) -> dict[str, dict[str, int]]:
    """What a run of ``program`` covers: per entry, the repeats that showed it
    (``reached``) and the changes between compiled calls that realised it."""
    out = {name: dict(counts) for name, counts in reached(program).items()}
    for name, counts in between_calls(program, changed).items():
        for col, n in counts.items():
            out.setdefault(name, {})[col] = out.get(name, {}).get(col, 0) + n
    return out


def realise(program: Program, entry: str) -> Optional[Program]:
    """``program`` with its second separate call written in the form
    ``entry`` names (a loop made separate calls if need be), or None if the
    form does not apply; ``program`` itself for entries that are not forms."""
    from .check import as_separate_calls, with_form
    from .forms import applies

    if entry in _RETYPES:
        return _retyped_program(program, entry)
    if entry not in FORMS:
        return program
    b = program.block
    if not applies(FORMS[entry], b.kind, len(b.args), not (b.pack or b.attrs)):
        return None
    k = next((k for k, s in enumerate(program.sections) if s.structure == "calls" and len(s.calls) > 1), None)
    if k is None:
        k = next((k for k, s in enumerate(program.sections) if len(s.calls) > 1), None)
        program = as_separate_calls(program, k) if k is not None else None
    return with_form(program, k, 1, entry) if program is not None else None


_RETYPES = ("type:int_float", "type:bool_number", "type:number_subclass", "type:tuple_list")


def _retyped_program(program: Program, entry: str) -> Optional[Program]:
    """``program`` with one later repeat's argument made equal to the first
    repeat's value but of the type pair ``entry`` names, or None."""
    from dataclasses import replace

    from .check import checked
    from .ir import with_call
    from .values import equal_values

    if entry in reached(program):
        return program
    first = program.sections[0].calls[0]
    for k, s in enumerate(program.sections):
        for i, call in enumerate(s.calls):
            if (k, i) == (0, 0):
                continue
            for j, old in enumerate(first.args):
                for new in equal_values(old):
                    if _type_pair(old, new) != entry:
                        continue
                    retyped = replace(call, args=call.args[:j] + (new,) + call.args[j + 1:])
                    candidate = checked(with_call(program, k, i, retyped))
                    if candidate is not None:
                        return candidate
    return None
