"""torch's operator database (OpInfo's ``op_db``) as ``generators.opinfo`` cases.

Where the installed torch ships the database (feature detection: its
``torch.testing._internal`` may be absent), every op's own sample inputs at
each dtype it supports on the CPU become cases, one per spelling the op has
and per tensor it returns. Torch itself says which spellings exist: a
spelling is kept for a sample only when, run eagerly, it computes bitwise
what the op's function computes (the method, in place on a clone, into
``out=``, the Python operator, the aten packet); a gradient only where the
op supports one at that dtype and eager's backward runs. Ops whose result
changes with the RNG seed are left out (an RNG-aware oracle is not built),
and so are samples the programs cannot carry (sparse, complex, more than
``MAX_NUMEL`` elements, arguments that are not literals). The database's own
expected failures and skips of the test classes that compile (``EXPECTED``)
are read as data, per op and dtype: a failure there is OpInfo's, never a
finding of ours. Built once per torch version and cached (``load``).
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import unittest
import warnings
from dataclasses import replace
from pathlib import Path

import torch

from generators.ir import NAN, TensorSpec
from generators.opinfo import Case

VERSION = 5  # of the cache's format and of what the builder keeps
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "bool")
MAX_NUMEL = 64  # per tensor: a case stays small to compile and to read in a repro
CROP = 4  # a larger sample tensor is cut to this along every dim
SAMPLES = 2  # per cell: the sweep runs the first, the steered search the others
# Test classes of torch's suites whose recorded failures concern compiling an op (Dynamo, AOTAutograd,
# inductor, fake and meta tensors, make_fx): the backends they apply to, None for all.
EXPECTED: dict[str, tuple[str, ...] | None] = {
    "TestInductorOpInfo": ("inductor",),
    "TestEagerFusionOpInfo": None,
    "TestFakeTensor": None,
    "TestMeta": None,
    "TestProxyTensorOpInfo": None,
    "TestDecomp": ("inductor",),
}
# Python operators, by the function an OpInfo names as its operator variant: binary, then unary.
BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/", operator.floordiv: "//",
          operator.mod: "%", operator.pow: "**", operator.matmul: "@", operator.and_: "&", operator.or_: "|",
          operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>", operator.eq: "==", operator.ne: "!=",
          operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
UNARY = {operator.neg: "-{0}", operator.invert: "~{0}", operator.abs: "abs({0})"}
NAMESPACES = {"nn.functional": "F", "linalg": "torch.linalg", "special": "torch.special", "fft": "torch.fft"}


class Unrenderable(ValueError):
    """A sample argument a program cannot write as a literal."""


def database():
    """OpInfo's op_db, or None where this torch does not ship it. Importing torch's test utilities freezes
    the cuDNN flags for the whole process (common_utils calls torch.backends.disable_global_flags(), for
    torch's own test runs): they are thawed again, so the process goes on as it was."""
    frozen = torch.backends.flags_frozen()
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception:  # an install without the testing package, or one whose import fails
        return None
    finally:
        if not frozen and torch.backends.flags_frozen():  # the flag is a global of the function's own module
            torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
    return op_db


def cache_path() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "dedup-harness" / f"opinfo-v{VERSION}-torch-{torch.__version__}.json"


def load(path: Path | None = None) -> list[Case]:
    """Every case of the installed torch's database (built on first use, then read from the cache);
    [] where torch has no database."""
    path = path or cache_path()
    try:
        return [Case.from_dict(d) for d in json.loads(path.read_text())["cases"]]
    except (OSError, ValueError, KeyError):
        pass
    return build(path)


def check_names(names: tuple[str, ...]) -> None:
    """A clear error for a name the database does not have (or for a torch without the database)."""
    db = database()
    if db is None:
        raise ValueError("this torch ships no OpInfo database (torch.testing._internal): no ops to sweep")
    ops = {op_name(op) for op in db}
    unknown = [n for n in names if n not in ops]
    if unknown:
        import difflib

        near = sorted({m for n in unknown for m in difflib.get_close_matches(n, ops, 3)})
        raise ValueError(f"no OpInfo op named {', '.join(unknown)}" + (f" (close: {', '.join(near)})" if near else ""))


def select(names: tuple[str, ...]) -> list[Case]:
    """The cases of the named ops alone, built now (a few ops build in a second; no cache); an unknown
    name is an error that lists the close ones."""
    check_names(names)
    ops = {op_name(op): op for op in database() or ()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for n in names for c in op_cases(ops[n])]


def build(path: Path, partial: Path | None = None) -> list[Case]:
    """Build every case, op by op (each op's as one JSON line of ``partial``, for a reader that starts
    before the end), then write the cache ``path``."""
    db = database()
    if db is None:
        return []
    cases: list[Case] = []
    with warnings.catch_warnings(), (open(partial, "w") if partial else contextlib.nullcontext()) as lines:
        warnings.simplefilter("ignore")
        for op in db:
            made = op_cases(op)
            cases += made
            if lines is not None and made:
                lines.write(json.dumps({"cases": [c.to_dict() for c in made]}) + "\n")
                lines.flush()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"torch": torch.__version__, "cases": [c.to_dict() for c in cases]}))
    os.replace(tmp, path)
    return cases


def read_partial(partial: Path, offset: int) -> tuple[list[Case], int, str]:
    """The cases of the complete lines of a build's ``partial`` file past ``offset``; the new offset; the
    build's error, if it wrote one."""
    try:
        with open(partial, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset, ""
    end = data.rfind(b"\n") + 1
    cases, error = [], ""
    for line in data[:end].splitlines():
        entry = json.loads(line)
        error = entry.get("error", error)
        cases += [Case.from_dict(d) for d in entry.get("cases", ())]
    return cases, offset + end, error


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.opinfo_db --build PARTIAL``: build the cache, op by op into PARTIAL."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--build", type=Path, required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    try:
        build(cache_path(), args.build)
    except Exception as e:  # the reader reports it and goes on without the rest
        with open(args.build, "a") as f:
            f.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    return 0



def op_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def expected(op, dtype: torch.dtype, backend: str = "") -> str:
    """OpInfo's own record of a failure of ``op`` at ``dtype`` in a test class that compiles."""
    for info in [*(op.decorators or ()), *(getattr(op, "skips", ()) or ())]:
        cls = getattr(info, "cls_name", None)
        if cls not in EXPECTED or (EXPECTED[cls] and backend and backend not in EXPECTED[cls]):
            continue
        if info.device_type not in (None, "cpu") or (info.dtypes is not None and dtype not in info.dtypes):
            continue
        if not any(d is unittest.expectedFailure or getattr(d, "__name__", "") in ("skip", "decorator")
                   for d in info.decorators):
            continue
        try:
            if not info.active_if:
                continue
        except Exception:
            continue
        return f"{cls}.{info.test_name or '*'}"
    return ""


def op_cases(op) -> list[Case]:
    name = op_name(op)
    try:
        dtypes = [d for d in DTYPES if getattr(torch, d) in op.supported_dtypes("cpu")]
        backward = set(op.supported_backward_dtypes("cpu")) if op.supports_autograd else set()
    except Exception:
        return []
    if op.is_factory_function or op.has_nondeterministic_output:
        return []
    cases: list[Case] = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        grad = dtype in backward
        try:
            torch.manual_seed(0)
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=grad))
        except Exception:
            continue
        taken: dict[str, int] = {}
        for index, sample in enumerate(samples):
            try:
                made = _sample_cases(op, name, dtype_name, index, sample, grad)
            except Exception:  # a sample the function itself refuses, or one we cannot carry
                continue
            for case in made:
                if taken.get(case.cell, 0) < SAMPLES * (1 + max(case.item, 0)):
                    taken[case.cell] = taken.get(case.cell, 0) + 1
                    cases.append(case)
            if taken and min(taken.values()) >= SAMPLES:
                break
    if any(_random(op, c) for c in cases[:1]):
        return []
    note = {c.dtype: ("OpInfo.skip_correctness_check_compile_vs_eager" if op.skip_correctness_check_compile_vs_eager
                      else expected(op, getattr(torch, c.dtype))) for c in cases}
    return [replace(c, expected=note[c.dtype]) for c in cases]


def _tensors(value, found: list) -> None:
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors(v, found)


def _literal(value, tensors: list) -> str:
    """``value`` as source, tensors as ``{i}`` (their index in ``tensors``)."""
    if isinstance(value, torch.Tensor):
        return "{" + str(next(i for i, t in enumerate(tensors) if t is value)) + "}"
    if isinstance(value, (bool, int, str)) or value is None:
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.Size):
        value = tuple(value)
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v, tensors) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v, tensors) for v in value) + "]"
    raise Unrenderable(type(value).__name__)


def _fmt(callee: str, args: list, kwargs: dict, tensors: list, extra: str = "") -> str:
    """A call template: literals escaped for str.format, tensors as ``{i}``."""
    out = []
    for a in args:
        out.append(_literal(a, tensors))
    out += [f"{k}={_literal(v, tensors)}" for k, v in kwargs.items()]
    if extra:
        out.append(extra)
    return f"{callee}({', '.join(out)})"


def _function_path(op) -> tuple[str, str] | None:
    """(kind, callee) naming ``op.op`` as Python writes it, if a public name resolves to it."""
    for prefix, namespace in NAMESPACES.items():
        if op.name.startswith(prefix + "."):
            attr = op.name[len(prefix) + 1:]
            module = eval(namespace, {"torch": torch, "F": torch.nn.functional})  # a fixed table of names
            if getattr(module, attr, None) is op.op:
                return ("functional" if prefix == "nn.functional" else "torch"), f"{namespace}.{attr}"
            return None
    if getattr(torch, op.name, None) is op.op:
        return "torch", f"torch.{op.name}"
    return None


def _values(t: torch.Tensor) -> tuple:
    return tuple(NAN if isinstance(v, float) and v != v else v for v in t.detach().reshape(-1).tolist())


def _spec(t: torch.Tensor, grad: bool, data: bool = True) -> TensorSpec:
    return TensorSpec(tuple(t.shape), str(t.dtype).removeprefix("torch."), grad, "contiguous",
                      _values(t) if data else None)


def _carriable(t: torch.Tensor) -> bool:
    return (t.layout == torch.strided and not t.is_complex() and t.numel() <= MAX_NUMEL
            and str(t.dtype).removeprefix("torch.") in DTYPES)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (a.shape == b.shape and a.dtype == b.dtype
                and bool(torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                               and torch.equal(torch.nan_to_num(a, 0.0), torch.nan_to_num(b, 0.0)))))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return False


def _outputs(result) -> list[torch.Tensor] | None:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)) and result and all(isinstance(r, torch.Tensor) for r in result):
        return list(result)
    return None


def _run(fmt: str, tensors: list[torch.Tensor], grad: bool):
    env = {"torch": torch, "F": torch.nn.functional}
    fresh = [t.detach().clone().requires_grad_(grad and t.is_floating_point()) for t in tensors]
    return eval(fmt.format(*(f"_t{i}" for i in range(len(fresh)))), env, {f"_t{i}": t for i, t in enumerate(fresh)}), fresh


def _cropped(value):
    """A sample's tensors cut to at most CROP along every dim (OpInfo's elementwise samples are 20 x 20);
    whatever the op then refuses or computes otherwise is dropped by the checks that follow."""
    if isinstance(value, torch.Tensor):
        if value.numel() <= MAX_NUMEL:
            return value
        cut = value.detach()[tuple(slice(0, min(d, CROP)) for d in value.shape)].clone()
        return cut.requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        return type(value)(_cropped(v) for v in value)
    if isinstance(value, dict):
        return {k: _cropped(v) for k, v in value.items()}
    return value


def _sample_cases(op, name: str, dtype: str, index: int, sample, grad: bool) -> list[Case]:
    args, kwargs = _cropped([sample.input, *sample.args]), _cropped(dict(sample.kwargs))
    tensors: list[torch.Tensor] = []
    _tensors([args, kwargs], tensors)
    if not tensors or not all(_carriable(t) for t in tensors) or len({id(t) for t in tensors}) != len(tensors):
        return []
    with torch.no_grad(), _Calls() as calls:
        result = op.op(*[_detached(a) for a in args], **{k: _detached(v) for k, v in kwargs.items()})
    effects, dynamic = calls.effectful(), calls.tagged(DATA_DEPENDENT_TAGS)
    single, reference = isinstance(result, torch.Tensor), _outputs(result)
    if reference is None or not all(_carriable(r) for r in reference):
        return []
    forms: dict[str, str] = {}
    path = _function_path(op)
    if path is not None:
        forms[path[0]] = _fmt(path[1], args, kwargs, tensors)
    primary = isinstance(sample.input, torch.Tensor)
    method = getattr(op.method_variant, "__name__", None)
    if primary and method and getattr(torch.Tensor, method, None) is op.method_variant:
        forms["method"] = "{0}." + _fmt(method, args[1:], kwargs, tensors)
    inplace = getattr(op.inplace_variant, "__name__", None)
    if primary and inplace and getattr(torch.Tensor, inplace, None) is op.inplace_variant:
        forms["inplace"] = "{0}.clone()." + _fmt(inplace, args[1:], kwargs, tensors)
    if primary and op.operator_variant in BINARY and len(args) == 2 and not kwargs:
        forms["operator"] = f"({{0}} {BINARY[op.operator_variant]} {_literal(args[1], tensors)})"
    if primary and op.operator_variant in UNARY and len(args) == 1 and not kwargs:
        forms["operator"] = UNARY[op.operator_variant]
    if op.aten_name and hasattr(torch.ops.aten, op.aten_name):
        forms["aten"] = _fmt(f"torch.ops.aten.{op.aten_name}", args, kwargs, tensors)
    if op.supports_out and path is not None and single:
        r = reference[0]
        forms["out"] = _fmt(path[1], args, kwargs, tensors,
                            f"out=torch.empty({tuple(r.shape)!r}, dtype={r.dtype})")
    cases = []
    for kind, fmt in forms.items():
        try:
            with torch.no_grad():
                got, _ = _run(fmt, tensors, False)
        except Exception:
            continue
        if isinstance(got, torch.Tensor) != single:
            continue
        got = _outputs(got)
        if got is None or not _same(got, reference):
            continue
        wants_grad = grad and kind != "out" and (kind != "inplace" or op.supports_inplace_autograd)
        if wants_grad and not _backward_runs(fmt, tensors, len(reference)):
            wants_grad = False
        specs = tuple(_spec(t, wants_grad and t.is_floating_point()) for t in tensors)
        for item, r in enumerate(reference):
            select = fmt if single else f"{fmt}[{item}]"
            cases.append(Case(name, kind, dtype, select, specs, _spec(r, False, data=False), index, -1 if single else item,
                              effects=effects, dynamic=dynamic))
    return cases


# Tags of aten ops whose output's size or value Dynamo cannot know while tracing: a call breaks the graph (unless
# capture_dynamic_output_shape_ops / capture_scalar_outputs), so a block calling one forms no region.
DATA_DEPENDENT_TAGS = tuple(t for t in (getattr(torch.Tag, "dynamic_output_shape", None),
                                        getattr(torch.Tag, "data_dependent_output", None)) if t is not None)


class _Calls(torch.utils._python_dispatch.TorchDispatchMode):
    """The aten ops a sample calls below autograd, to ask torch which carry an effect (an effect token
    threads through a compiled graph that calls one: ``torch._higher_order_ops.effects``)."""

    def __init__(self):
        super().__init__()
        self.ops: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func)
        return func(*args, **(kwargs or {}))

    def tagged(self, tags: tuple) -> tuple[str, ...]:
        """The ops called that carry one of ``tags``."""
        return tuple(sorted(str(op) for op in self.ops if any(t in getattr(op, "tags", ()) for t in tags)))

    def effectful(self) -> tuple[str, ...]:
        try:
            from torch._higher_order_ops.effects import _get_effect
        except ImportError:  # a torch without effect tokens
            return ()
        found = []
        for op in self.ops:
            try:
                if _get_effect(op) is not None:
                    found.append(str(op))
            except Exception:
                continue
        return tuple(sorted(found))


def _detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)):
        return type(value)(_detached(v) for v in value)
    return value


def _backward_runs(fmt: str, tensors: list[torch.Tensor], items: int) -> bool:
    try:
        got, fresh = _run(fmt, tensors, True)
        outs = _outputs(got) or []
        total = sum(o.float().sum() for o in outs if o.requires_grad)
        if not isinstance(total, torch.Tensor):
            return False
        total.backward()
        return True
    except Exception:
        return False


def _random(op, case: Case) -> bool:
    """Whether ``op`` draws from the RNG: its case gives other values under another seed."""
    tensors = [torch.tensor(t.data, dtype=getattr(torch, t.dtype)).reshape(t.shape) for t in case.tensors]
    runs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        with torch.no_grad():
            runs.append(_run(case.fmt, tensors, False)[0])
    return not _same(_outputs(runs[0]) or [], _outputs(runs[1]) or [])


if __name__ == "__main__":
    raise SystemExit(main())
