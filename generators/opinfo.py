"""Cases from torch's own operator database (OpInfo), as plain values, and the
programs that run them.

A *case* is one sample input of one OpInfo op, written in one spelling
(``KINDS``: the function, the Tensor method, in place on a fresh tensor,
into ``out=``, the Python operator, the aten overload packet), at one dtype:
the template that calls it, the sample's tensors with their values, and the
type of the output it selects. A *cell* is (op, spelling, dtype): what a
backend supports or gets wrong, the unit the sweep and the coverage table
count. ``harness.opinfo_db`` builds the cases from the installed torch (it
asks torch which spellings compute what the function computes); everything
here is pure data, so a case round-trips through JSON and a program made of
cases renders without the database.

In a program a case is one statement of op ``OPINFO`` (operands: the
sample's tensors as ``Ref``s, then the template, the output's shape and
dtype as ``Const``s) whose tensors are program inputs holding the sample's
values (``TensorSpec.data``). ``sweep_program`` puts several cases of one
output dtype into one layer block, called twice (the second time on a copy
of the first tensor) so that the block is a deduplicated region (and, with ``region``, a ``nested_compile_region``
body); the block returns the cases' outputs flattened into one tensor, so
one compile judges them all and a failure is narrowed to its case by
halving (``halves``). Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .ir import Block, Call, Const, Options, Program, Ref, Section, Stmt, TensorSpec, _dec_spec, _enc_spec

OPINFO = "opinfo"  # the op of a statement that calls an OpInfo case
# Spelling kinds of an OpInfo op, simplest first (generators.spellings.KINDS names the same forms).
KINDS = ("torch", "functional", "method", "operator", "aten", "inplace", "out")
CELL_SEP = "|"


@dataclass(frozen=True)
class Case:
    op: str  # the OpInfo name, ".variant" appended when it has a variant_test_name
    kind: str  # one of KINDS
    dtype: str  # the dtype the sample was made in
    fmt: str  # the call, ``{i}`` the i-th tensor
    tensors: tuple[TensorSpec, ...]  # the sample's tensors, values in ``data``
    out: TensorSpec  # the selected output's type (no data)
    sample: int = 0  # index among the op's samples at this dtype
    item: int = -1  # which item of a tuple output the template selects (-1: a single tensor)
    expected: str = ""  # OpInfo's own record of a failure here (test class and name): never a finding of ours
    effects: tuple[str, ...] = ()  # aten ops it calls that torch threads an effect token through
    dynamic: tuple[str, ...] = ()  # aten ops it calls whose output size or value is data-dependent (a graph break)

    @property
    def cell(self) -> str:
        return cell(self.op, self.kind, self.dtype)

    def to_dict(self) -> dict:
        return {"op": self.op, "kind": self.kind, "dtype": self.dtype, "fmt": self.fmt,
                "tensors": [_enc_spec(t) for t in self.tensors], "out": _enc_spec(self.out), "sample": self.sample,
                "item": self.item, "expected": self.expected, **({"effects": list(self.effects)} if self.effects else {}),
                **({"dynamic": list(self.dynamic)} if self.dynamic else {})}

    @staticmethod
    def from_dict(d: dict) -> "Case":
        return Case(d["op"], d["kind"], d["dtype"], d["fmt"], tuple(_dec_spec(t) for t in d["tensors"]),
                    _dec_spec(d["out"]), int(d.get("sample", 0)), int(d.get("item", -1)), d.get("expected", ""),
                    tuple(d.get("effects", ())), tuple(d.get("dynamic", ())))


def cell(op: str, kind: str, dtype: str) -> str:
    return CELL_SEP.join((op, kind, dtype))


def split_cell(key: str) -> tuple[str, str, str]:
    op, kind, dtype = key.split(CELL_SEP)
    return op, kind, dtype


def statement(case: Case, names: list[str], out: str) -> Stmt:
    return Stmt(out, OPINFO, (*(Ref(n) for n in names), Const(case.fmt), Const(tuple(case.out.shape)),
                              Const(case.out.dtype)))


def parts(stmt: Stmt) -> tuple[list[Ref], str, tuple, str]:
    """The tensors, the template, the output shape and dtype of an ``OPINFO`` statement."""
    *refs, fmt, shape, dtype = stmt.operands
    return list(refs), fmt.value, tuple(shape.value), dtype.value


def sweep_program(cases: list[Case], region: bool = False, repeats: int = 2, seed: int = 0) -> Program:
    """One program judging ``cases`` (of one output dtype) in a block called
    ``repeats`` times with the same inputs: identical repeats, one region."""
    dtypes = {c.out.dtype for c in cases}
    if len(dtypes) != 1:
        raise ValueError(f"a sweep program's cases share their output dtype, got {sorted(dtypes)}")
    inputs: list[tuple[str, TensorSpec]] = []
    body: list[Stmt] = []
    flat: list[str] = []
    for k, case in enumerate(cases):
        names = []
        for j, spec in enumerate(case.tensors):
            names.append(f"c{k}_{j}")
            inputs.append((names[-1], spec))
        body.append(statement(case, names, f"v{k}"))
        flat.append(f"v{k}")
    result = f"v{len(cases)}"
    joined = "torch.cat([" + ", ".join(f"{{{i}}}.reshape(-1)" for i in range(len(flat))) + "])"
    body.append(Stmt(result, OPINFO, (*(Ref(n) for n in flat), Const(joined),
                                      Const((sum(_numel(c.out.shape) for c in cases),)), Const(dtypes.pop()))))
    # the carried input x is the first case's first tensor (every block reads all inputs; fanout keeps x as is);
    # each later repeat passes a copy of it, so the repeats compute equal values from distinct tensors: their
    # outputs are distinct tensors a backend may not fold into one (eager returns two)
    block = Block("function", tuple(n for n, _ in inputs), (), (), (), tuple(body), result, compile_region=region)
    copies = [(f"{inputs[0][0]}_{k}", inputs[0][1]) for k in range(1, repeats)]
    section = Section("for_range", "fanout", tuple(Call(tensor=n) for n in [inputs[0][0], *(n for n, _ in copies)]))
    return Program(tuple(inputs + copies), block, (section,), outputs="tuple", options=Options(), seed=seed,
                   meta={"opinfo": [c.to_dict() for c in cases]})


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def cases_of(program: Program) -> list[Case]:
    """The cases a program was made of (``sweep_program`` keeps them in its meta)."""
    return [Case.from_dict(d) for d in program.meta.get("opinfo", ())]


def effectful(program: Program) -> bool:
    """Whether a case of the program calls an op torch threads an effect token through."""
    return any(c.effects for c in cases_of(program))


# Ops whose result jumps where its input crosses a point (an integer, a sign, a threshold): a backend that
# computes in a lower precision than it is given moves inputs across those points, not a bug of its own
# (generators.ops.ROUNDING_SENSITIVE is the hand catalogue's list of the same kind).
ROUNDING_OPS = frozenset({
    "floor", "ceil", "round", "trunc", "fix", "frac", "sign", "sgn", "signbit", "remainder", "fmod", "floor_divide",
    "div", "reciprocal", "rsqrt", "atan2", "arctan2", "copysign", "nextafter", "heaviside", "where", "masked_fill",
    "nn.functional.threshold", "nn.functional.hardshrink", "nn.functional.softshrink", "nn.functional.hardtanh",
    "nn.functional.relu6", "clamp", "clamp_min", "clamp_max", "clip", "histc", "bucketize", "searchsorted",
})


def rounding_sensitive(case: Case) -> bool:
    """A case a lower-precision backend cannot be judged on: an integral or boolean result of floating inputs
    (a comparison, an index), or an op of ``ROUNDING_OPS``."""
    floating = any(t.dtype in ("float32", "float64", "bfloat16", "float16") for t in case.tensors)
    return (floating and case.out.dtype in ("bool", "int64")) or case.op.split(".")[0] in ROUNDING_OPS \
        or case.op in ROUNDING_OPS


def halves(cases: list[Case]) -> tuple[list[Case], list[Case]]:
    mid = len(cases) // 2
    return cases[:mid], cases[mid:]


def without_grad(case: Case) -> Case:
    """The case with no tensor requiring grad (a judgment of the forward alone)."""
    return replace(case, tensors=tuple(replace(t, requires_grad=False) for t in case.tensors))
