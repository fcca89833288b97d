"""Finding each planted fault of ``suites.planted_differences`` the way a
campaign would: draw programs, keep those that show the fault's catalogue
entry (``generators.differences``), and judge each on the honest pipeline
and under the fault. A program the honest pipeline already fails (a real
torch bug) proves nothing about the fault and is passed over."""

from __future__ import annotations

import json
import sys
from fnmatch import fnmatchcase
import time
from pathlib import Path
from typing import Optional

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from generators.differences import BY_NAME, LAYOUT_READS, SHAPE_READS, TYPE_READS, coverage, realise
from generators.check import check
from generators.forms import FORMS
from generators.ops import CALLABLES
from generators.ir import MalformedProgram, Arg, Block, Call, Context, Free, FreeVar, Program, Ref, Section, Stmt, TensorSpec, to_dict
from generators.strategies import programs
from generators.variants import variants
from generators.variation import equalize
from harness.pipeline import InvalidProgram, run_program
from oracles.registry import judge, run_config

from .planted_differences import FAULTS

DATA = Path(__file__).parent / "data" / "planted_differences.json"
ORACLES = ("differential", "guards", "compile_region", "dedup_toggle", "region_identity")


def shows(program: Program, entry: str) -> bool:
    return entry in coverage(program, [v.kind for v in variants(program)])


# Oracles an entry is judged by, where not all of ORACLES: region_identity sees the
# pass group regions whose inputs alias differently (KI-028's topology), which the
# planted alias fault does not change.
# Context entries are judged by the differential oracle alone: the guard oracle's
# changes between calls meet KI-017 (a call under inference_mode) first.
ORACLES_FOR = {"tensor:alias": ("differential", "dedup_toggle"), "state:grad_mode": ("differential",),
               "state:inference_mode": ("differential",), "tensor:frozen_params": ("differential", "compile_region")}


def failures(program: Program, dedup: bool, fault: Optional[str] = None, entry: str = "") -> Optional[list]:
    """The failing verdicts of one run (None: the program is not valid);
    under the planted fault of catalogue entry ``fault``, if given; by the
    oracles ``entry`` (default: ``fault``) is judged by."""
    oracles = ORACLES_FOR.get(entry or fault or "", ORACLES)

    def run():
        return run_program(program, run_config("aot_eager", oracles, variants=-1, dedup=dedup))

    try:
        if fault is None:
            outcome = run()
        else:
            with FAULTS[fault]():
                outcome = run()
    except InvalidProgram:
        return None
    return [v for v in judge(outcome, oracles) if v.failed]


def _one_instance(program: Program) -> Optional[Program]:
    """Every call of the module block through one shared instance."""
    from dataclasses import replace

    from generators.check import PER_INSTANCE, checked

    return checked(replace(program, sections=tuple(replace(s, structure="for_range") if s.structure in PER_INSTANCE
                                                   else s for s in program.sections)))


def _unwritten(program: Program) -> Program:
    from dataclasses import replace

    return replace(program, sections=tuple(replace(s, write=None) for s in program.sections))


REMOVERS = {"object:instances": _one_instance, "state:input_written": _unwritten}


def without(program: Program, entry: str) -> Optional[Program]:
    """``program`` with ``entry``'s difference taken away (its variation removed)."""
    if entry in REMOVERS:
        return REMOVERS[entry](program)
    variation = BY_NAME[entry].variation
    kinds = [k for k in program.variations() if variation and k.startswith(variation)]
    return equalize(program, kinds) if kinds else None


def attributable(entry: str, program: Program, dedup: bool, caught: list) -> bool:
    """Whether the fault was caught through the entry's own difference: a
    change between compiled calls that realises the entry, or a difference
    between repeats whose removal leaves the fault nothing to act on."""
    patterns = BY_NAME[entry].between_calls
    for verdict in caught:
        kind = (verdict.details.get("variant") or {}).get("kind", "")
        if kind and any(fnmatchcase(kind, p) for p in patterns):
            return True
    plain = without(program, entry)
    return plain is not None and failures(plain, dedup, entry) == []


def _reads_free(*ops: str):
    return lambda p: any(s.op in ops and any(isinstance(o, Free) for o in s.operands) for b in p.blocks() for s in b.body)


def _has(*ops: str):
    return lambda p: any(s.op in ops for b in p.blocks() for s in b.body)


def _varies(prefix: str):
    return lambda p: any(k.startswith(prefix) for k in p.variations())


def _region(p: Program) -> bool:
    return any(b.compile_region for b in p.blocks())


# What else a program needs for an entry's fault to have something to act on
# (beyond showing the entry): the programs the search judges first.
NEEDS = {
    "type:int_float": _reads_free(*TYPE_READS), "type:bool_number": _reads_free(*TYPE_READS),
    "type:tuple_list": _reads_free(*TYPE_READS), "type:number_subclass": _has("type_is_int"),
    "derived:shape": lambda p: _has(*SHAPE_READS)(p) and _varies("tensor:shape")(p),
    "derived:dtype": lambda p: _has("dtype_branch", "softmax_upcast")(p) and _varies("tensor:dtype")(p),
    "derived:layout": lambda p: _has(*LAYOUT_READS)(p) and (_varies("tensor:layout")(p) or _varies("tensor:view")(p)),
    "derived:requires_grad": lambda p: _has("requires_grad_branch")(p) and _varies("tensor:requires_grad")(p),
    "derived:python_type": _has(*TYPE_READS), "object:callable_value": _has("apply"),
    "object:instances": lambda p: _region(p) and p.block.kind == "module" and bool(p.block.weights),
    "tensor:frozen_params": lambda p: _region(p) and _varies("frozen")(p),
    # a reused body computes differently only where it read the metadata the check forgot
    "tensor:dtype": lambda p: _region(p) and _varies("tensor:dtype")(p) and _has("dtype_branch", "softmax_upcast")(p),
    "tensor:layout": lambda p: _region(p) and _has(*LAYOUT_READS)(p) and _varies("tensor:")(p),
    "tensor:requires_grad": lambda p: _region(p) and _varies("tensor:requires_grad")(p)
    and _has("requires_grad_branch")(p),
    "state:global": _varies("set:global"), "state:class_attr": _varies("set:class_attr"),
    "state:dataclass": _varies("set:dataclass"), "state:namespace": _varies("set:namespace"),
    "state:dict": _varies("set:dict"),
}
# Entries whose fault acts in the deduplication pass: judged with it on.
IN_THE_PASS = ("tensor:shape", "tensor:alias")


# Ops a search draws from for entries whose fault acts only where the body reads something
# (None: every op): the reads, and a few plain ops around them.
_PLAIN = ("sin", "mul_scalar", "add", "tanh")
FOCUS = {
    "derived:shape": SHAPE_READS, "derived:dtype": ("dtype_branch", "softmax_upcast"), "derived:layout": LAYOUT_READS,
    "derived:requires_grad": ("requires_grad_branch",), "derived:python_type": TYPE_READS,
    "type:int_float": TYPE_READS, "type:bool_number": TYPE_READS, "type:tuple_list": ("isinstance_tuple",),
    "type:number_subclass": ("type_is_int",), "tensor:dtype": ("dtype_branch",),
    "tensor:requires_grad": ("requires_grad_branch",), "tensor:layout": LAYOUT_READS, "object:callable_value": ("apply",),
}


# Small strategies for the entries whose fault needs a rare combination the
# general draw seldom makes (a free value of one type read by a type test and
# changed between calls; a nested_compile_region body reading metadata its
# calls' tensors differ in): the property test's own generators.
_HOMES = ("global", "closure", "class_attr", "dataclass", "namespace")
_SHAPES = st.sampled_from(((3, 4), (2, 3, 4), (4,)))


@st.composite
def _free_read(draw, op: str, values: tuple) -> Program:
    shape = draw(_SHAPES)
    kind = draw(st.sampled_from(("function", "module")))
    body = (Stmt("v0", op, (Ref("x"), Free("p0"))), Stmt("v1", draw(st.sampled_from(_PLAIN[:1] + _PLAIN[3:])), (Ref("v0"),)))
    block = Block(kind, ("x",), (), (), (), body, "v1")
    free = FreeVar("p0", draw(st.sampled_from(values)), draw(st.sampled_from(_HOMES)))
    return Program(inputs=(("x", TensorSpec(shape)),), block=block, frees=(free,),
                   sections=(Section(draw(st.sampled_from(("calls", "for_range"))), "chain", (Call(), Call())),))


@st.composite
def _region_read(draw, op: str, differ: str, region: bool = True) -> Program:
    shape = draw(_SHAPES)
    x = TensorSpec(shape)
    other = {"dtype": TensorSpec(shape, "float64"), "requires_grad": TensorSpec(shape, requires_grad=True),
             "layout": TensorSpec(shape, layout="transposed"), "shape": TensorSpec((*shape[:-1], shape[-1] + 1))}[differ]
    if differ == "layout" and len(shape) < 2:
        other = TensorSpec((3, 4), layout="transposed")
        x = TensorSpec((3, 4))
    body = (Stmt("v0", op, (Ref("x"),)), Stmt("v1", draw(st.sampled_from(_PLAIN[:1] + _PLAIN[3:])), (Ref("v0"),)))
    block = Block(draw(st.sampled_from(("function", "module"))), ("x",), (), (), (), body, "v1", compile_region=region)
    calls = (Call(tensor="x"), Call(tensor="y0"))
    return Program(inputs=(("x", x), ("y0", other)), block=block, outputs="tuple",
                   sections=(Section("calls", "fanout", calls if draw(st.booleans()) else calls[::-1]),))


@st.composite
def _arg_read(draw, op: str, pairs: tuple) -> Program:
    first, second = draw(st.sampled_from(pairs))
    body = (Stmt("v0", op, (Ref("x"), Arg("s0"))), Stmt("v1", "sin", (Ref("v0"),)))
    block = Block(draw(st.sampled_from(("function", "module"))), ("x",), (), (), ("s0",), body, "v1")
    return Program(inputs=(("x", TensorSpec(draw(_SHAPES))),), block=block, outputs="tuple",
                   sections=(Section("calls", "fanout", (Call((first,)), Call((second,)))),))


@st.composite
def _in_call_set(draw, home: str) -> Program:
    old, new = draw(st.sampled_from(((2.0, -1.0), (0.5, 2.0), (-1.0, 1.5))))
    structure = "for_range" if home == "namespace" else draw(st.sampled_from(("calls", "for_range")))
    body = (Stmt("v0", "mul_scalar", (Ref("x"), Free("p0"))), Stmt("v1", "sin", (Ref("v0"),)))
    block = Block(draw(st.sampled_from(("function", "module"))), ("x",), (), (), (), body, "v1")
    return Program(inputs=(("x", TensorSpec(draw(_SHAPES))),), block=block, frees=(FreeVar("p0", old, home),),
                   sections=(Section(structure, "chain", (Call(sets=(("p0", old),)), Call(sets=(("p0", new),)))),))


@st.composite
def _instances(draw, frozen: bool) -> Program:
    w = ("w0", TensorSpec((4, 4)))
    body = (Stmt("v0", "matmul", (Ref("x"), Ref("w0"))), Stmt("v1", draw(st.sampled_from(("sin", "tanh"))), (Ref("v0"),)))
    block = Block("module", ("x",), (w,), (), (), body, "v1", compile_region=True)
    n = draw(st.integers(2, 3))
    calls = tuple(Call(frozen=frozen and i == n - 1) for i in range(n))
    x = TensorSpec((draw(st.sampled_from((2, 3))), 4), requires_grad=draw(st.booleans()))
    return Program(inputs=(("x", x),), block=block, sections=(Section(draw(st.sampled_from(("calls", "module_list"))),
                                                                        "chain", calls),))


@st.composite
def _contexts(draw, field: str, values: tuple, op: str) -> Program:
    a, b = draw(st.permutations(values))
    body = (Stmt("v0", op, (Ref("x"),) + ((Ref("w0"),) if op == "matmul" else ())), Stmt("v1", "sin", (Ref("v0"),)))
    weights = (("w0", TensorSpec((4, 4))),) if op == "matmul" else ()
    block = Block("function", ("x",), weights, (), (), body, "v1")
    calls = (Call(context=Context(**{field: a})), Call(context=Context(**{field: b})))
    return Program(inputs=(("x", TensorSpec((3, 4), requires_grad=True)),), block=block, outputs="tuple",
                   sections=(Section("calls", "fanout", calls),))


@st.composite
def _two_inputs(draw, what: str) -> Program:
    shape = draw(_SHAPES)
    body = (Stmt("v0", draw(st.sampled_from(("add", "mul"))), (Ref("x"), Ref("y0"))), Stmt("v1", "sin", (Ref("v0"),)),
            Stmt("v2", "mul", (Ref("v1"), Ref("y0"))))
    block = Block("function", ("x", "y0"), (), (), (), body, "v2")
    inputs = (("x", TensorSpec(shape)), ("y0", TensorSpec(shape)))
    if what == "alias":  # block(x, y0), then block(x, x): the aliased call later in the group
        calls = (Call(tensor="x"), Call(tensor="x", alias="same"))
        return Program(inputs=inputs, block=block, outputs="tuple",
                       sections=(Section(draw(st.sampled_from(("for_range", "calls"))), "fanout", calls),))
    return Program(inputs=inputs, block=block, sections=(Section("calls", "chain", (Call(), Call()),
                                                                 write=("y0", draw(st.sampled_from(("direct", "view"))))),))


@st.composite
def _attributes(draw) -> Program:
    body = (Stmt("v0", "mul_scalar", (Ref("x"), Arg("s0"))), Stmt("v1", "sin", (Ref("v0"),)))
    block = Block("module", ("x",), (), (), ("s0",), body, "v1", attrs=True,
                  compile_region=draw(st.booleans()))
    a, b = draw(st.sampled_from(((2.0, 0.5), (1.5, -1.0), (0.5, 0.5))))
    return Program(inputs=(("x", TensorSpec(draw(_SHAPES))),), block=block,
                   sections=(Section(draw(st.sampled_from(("calls", "module_list"))), "chain", (Call((a,)), Call((b,)))),))


TARGETED = {
    "type:int_float": _free_read("type_is_int", (1, 2, 2.0, 1.0)),
    "tensor:alias": _two_inputs("alias"), "state:input_written": _two_inputs("write"),
    "object:instance_attrs": _attributes(),
    "derived:shape": _region_read("shape_branch", "shape", region=False),
    "derived:dtype": _region_read("dtype_branch", "dtype", region=False),
    "derived:layout": _region_read("contiguous_branch", "layout", region=False),
    "derived:requires_grad": _region_read("requires_grad_branch", "requires_grad", region=False),
    "derived:python_type": _arg_read("type_is_int", ((2, 2.0), (True, 1), (1.0, 1))),
    "object:instances": _instances(False), "tensor:frozen_params": _instances(True),
    "object:callable_value": _arg_read("apply", tuple(zip(CALLABLES, CALLABLES[1:]))),
    "state:global": _in_call_set("global"), "state:class_attr": _in_call_set("class_attr"),
    "state:dataclass": _in_call_set("dataclass"), "state:namespace": _in_call_set("namespace"),
    "state:dict": _in_call_set("dict"),
    "state:grad_mode": _contexts("grad", (True, False), "sin"),
    "state:inference_mode": _contexts("inference", (False, True), "sin"),
    "state:autocast": _contexts("autocast", (False, True), "matmul"),
    "state:default_dtype": _contexts("default_dtype", ("float32", "float64"), "default_dtype_branch"),
    "type:bool_number": _free_read("type_is_int", (True, False, 1)),
    "type:tuple_list": _free_read("isinstance_tuple", ((1, 2), (3,))),
    "tensor:dtype": _region_read("dtype_branch", "dtype"),
    "tensor:requires_grad": _region_read("requires_grad_branch", "requires_grad"),
    "tensor:layout": _region_read("contiguous_branch", "layout"),
}


def drawn(n: int, at: int, ops: Optional[tuple[str, ...]] = None, strategy=None) -> list[Program]:
    out: list[Program] = []

    @seed(at)
    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(strategy if strategy is not None else programs(edges=True, ops=(*ops, *_PLAIN) if ops else None))
    def collect(p: Program) -> None:
        try:
            check(p)  # a targeted strategy may make what the IR rejects (a callable class attribute)
        except MalformedProgram:
            return
        out.append(p)

    collect()
    return out


def search(entry: str, n: int = 300, budget: float = 120.0, at: int = 0) -> dict:
    """The first drawn program showing ``entry`` that the honest pipeline
    passes and the fault fails: ``{"program", "dedup", "oracles", "tried",
    "seconds"}``, or ``{"tried", "seconds"}`` without ``program`` if none did
    within ``budget`` seconds."""
    started, tried = time.monotonic(), 0
    needs = NEEDS.get(entry, lambda p: True)
    candidates = drawn(min(n, 60), at, strategy=TARGETED[entry]) if entry in TARGETED else drawn(n, at, FOCUS.get(entry))
    for p in candidates:
        if time.monotonic() - started > budget:
            break
        q = realise(p, entry) or (None if entry in FORMS else p)  # a retype between repeats, if one fits
        if q is None or not needs(q) or not shows(q, entry):
            continue
        tried += 1
        for dedup in (True,) if entry in IN_THE_PASS else (False,):
            caught = failures(q, dedup, entry)  # the fault first: most programs give it nothing to act on
            if not caught or failures(q, dedup, entry=entry) != []:
                continue
            if attributable(entry, q, dedup, caught):
                return {"program": q, "dedup": dedup, "oracles": sorted({v.oracle for v in caught}),
                        "verdict": caught[0], "tried": tried, "seconds": round(time.monotonic() - started, 1)}
    return {"tried": tried, "seconds": round(time.monotonic() - started, 1)}


def record(entry: str, found: dict) -> dict:
    """A search result as the data file keeps it."""
    kept = {k: found[k] for k in ("tried", "seconds")}
    if "program" in found:
        verdict = found["verdict"]
        kept.update(program=to_dict(found["program"]), dedup=found["dedup"], oracles=found["oracles"],
                    verdict={"oracle": verdict.oracle, "kind": verdict.kind,
                             "details": {k: v for k, v in verdict.details.items() if k in ("variant", "label", "before")}})
    return kept


def main(entries: list[str], budget: float = 300.0) -> int:
    """Search for every entry (default: all that have no program yet) and keep what was found."""
    import logging
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    torch._logging.set_logs(dynamo=logging.CRITICAL)
    data = json.loads(DATA.read_text()) if DATA.exists() else {}
    for entry in entries or [e for e in FAULTS if "program" not in data.get(e, {})]:
        data[entry] = record(entry, search(entry, n=3000, budget=budget))
        print(entry, {k: v for k, v in data[entry].items() if k != "program"}, flush=True)
        DATA.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    return 0 if all("program" in data.get(e, {}) for e in FAULTS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
