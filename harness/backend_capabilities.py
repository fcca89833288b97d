"""What a backend offers, found by asking it, as ``harness.capabilities`` asks torch.

A backend nobody here wrote is fuzzed for what it claims to do: an
inference-only one (its outputs carry no autograd graph) forward-only, under
``torch.no_grad()`` or ``torch.inference_mode()``; one that computes in a
lower precision than it is given (a CPU plugin's bf16 hint) at the precision
it used; one that rejects ops it does not know at compile time has those
rejections counted as "unsupported", apart from crashes. Each answer comes
from compiling a small probe with the backend (or from what the backend
entry declares, for torch's own), once per process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from generators.check import dtypes_used
from generators.ir import Program
from generators.ops import OPS, ROUNDING_SENSITIVE

from .backends import BUILTIN, Backend, BackendError, resolve
from .execute import MODE_CONTEXTS, first_line

# Modes a program runs in: the context its calls run under. "auto" is train
# where the backend trains, else a drawn one of the inference modes.
MODES = tuple(MODE_CONTEXTS)
INFERENCE_MODES = tuple(m for m in MODES if m != "train")
FLOATS = ("float32", "float64", "float16", "bfloat16")
# Relative error of the probe (largest error over largest value, against a
# float64 eager run) up to which a backend computed in the dtype it was given.
AS_GIVEN = {"float64": 1e-12, "float32": 2e-5, "float16": 8e-3, "bfloat16": 6e-2}


@dataclass(frozen=True)
class BackendCapabilities:
    name: str
    training: bool  # outputs carry an autograd graph and the backward runs
    why_not_training: str = ""
    dtypes: tuple[str, ...] = FLOATS  # floating dtypes it compiles and runs
    # dtype given -> the dtype it computed in, where less precise
    precision: dict[str, str] = field(default_factory=dict)
    how_precision: str = "declared"  # "declared" or "detected"
    rejects: bool = False  # raises at compile time on an op it does not know (else falls back)
    seeded_random: bool = True  # its random ops draw from torch's generator, as eager's do under one seed

    @classmethod
    def from_dict(cls, d: dict) -> "BackendCapabilities":
        """As ``dataclasses.asdict`` wrote it (JSON: lists for tuples)."""
        return cls(**{**d, "dtypes": tuple(d["dtypes"])})

    def lost(self) -> dict[str, str]:
        """What the harness cannot check on this backend, said once in a report."""
        out = {}
        if not self.training:
            out["gradients"] = (f"{self.why_not_training}: programs run forward-only under no_grad or "
                                "inference_mode; gradient and requires_grad checks stand down")
        if not self.seeded_random:
            out["random"] = ("its random ops do not follow torch.manual_seed as eager's do: programs drawing random "
                             "numbers are not drawn (their values could not be compared)")
        for d in FLOATS:
            if d not in self.dtypes:
                out[f"dtype:{d}"] = f"the backend does not run {d} programs: none are drawn"
        return out

    def notes(self) -> list[str]:
        notes = [f"{given} compared at {used} ({self.how_precision})" for given, used in self.precision.items()]
        notes.append("rejects unknown ops at compile time (counted as unsupported)" if self.rejects
                     else "falls back on unknown ops")
        return notes


# What a backend callable may declare about itself, as an attribute of this
# name: a dict of BackendCapabilities fields (training, precision, dtypes, rejects).
DECLARED = "dedup_harness_capabilities"


def declared(backend: Backend) -> BackendCapabilities | None:
    """The capabilities a backend states: torch's own train at full precision;
    a callable may carry ``DECLARED``."""
    if backend.name in BUILTIN:
        return BackendCapabilities(backend.name, training=True)
    stated = getattr(backend.backend, DECLARED, None)
    if isinstance(stated, dict):
        return BackendCapabilities(backend.name, **{"training": True, **stated})
    return None


def _probe_fn(x, w):
    return torch.tanh(x @ w) * 2 + x.sum(-1, keepdim=True)


def _compile(backend: Backend, fn=_probe_fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend.compiler_fn(), **backend.options)


def _twice(call):
    """``call()``, once more if it raises (a runtime may fail now and then:
    iree-turbine beside a second process); None if both raise."""
    for _ in range(2):
        try:
            return call()
        except Exception:
            continue
    return None


def _inputs(dtype: torch.dtype, grad: bool = False):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g, dtype=torch.float64)
    w = torch.randn(16, 16, generator=g, dtype=torch.float64) / 4
    return x.to(dtype).requires_grad_(grad), w.to(dtype).requires_grad_(grad)


def _errors(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> tuple[float, float]:
    """The largest error over the largest value, against a float64 run, and
    the share of elements off by more than float32 rounding: a lower
    precision shows in nearly every element, a wrong kernel need not."""
    ref = _probe_fn(x.detach().double(), w.detach().double())
    err = (y.detach().double() - ref).abs()
    scale = ref.abs().max()
    return float(err.max() / scale), float((err > AS_GIVEN["float32"] * scale).double().mean())


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {first_line(e)}"[:300]


def _training(backend: Backend) -> tuple[bool, str]:
    x, w = _inputs(torch.float32, grad=True)
    y = _compile(backend)(x, w)
    if not (isinstance(y, torch.Tensor) and y.requires_grad):
        return False, "its outputs carry no autograd graph (an inference-only backend)"
    try:
        y.sum().backward()
    except Exception as e:  # the backward of an inference-only backend may raise anything
        return False, f"its backward raises ({_first_line(e)})"
    return True, ""


def _narrower(got: torch.dtype, given: torch.dtype) -> bool:
    """Whether ``got`` holds less than ``given`` (fewer bits, or as many
    with fewer mantissa bits: bfloat16 for float16)."""
    if not got.is_floating_point:
        return True
    a, b = torch.finfo(got), torch.finfo(given)
    return a.bits < b.bits or (a.bits == b.bits and a.eps > b.eps)


def _precision(backend: Backend) -> tuple[tuple[str, ...], dict[str, str]]:
    """The dtypes it runs, and for each the dtype it computed in where less precise:
    the error's size says low precision, a value past float16's range says which."""
    dtypes, precision = [], {}
    for name in sorted(FLOATS, key=lambda d: d == "float64"):  # float64, the one runtimes lack, last
        dtype = getattr(torch, name)
        x, w = _inputs(dtype)
        with torch.no_grad():
            y = _twice(lambda: _compile(backend)(x, w))
        if not isinstance(y, torch.Tensor) or _narrower(y.dtype, dtype):
            continue  # no such program runs: it raised, or handed back fewer bits (a runtime without the dtype)
        # (a tensor of another dtype no narrower, float32 -> float64 say, is a wrong answer, not a missing dtype:
        # its programs run, and the oracles judge them)
        dtypes.append(name)
        error, spread = _errors(y, x, w)
        if error <= AS_GIVEN[name] or error > AS_GIVEN["bfloat16"] or spread < 0.5:
            continue  # as given, or wrong rather than imprecise: the oracles judge it at full precision
        if name == "float16":  # less precise than float16: bfloat16
            precision[name] = "bfloat16"
            continue
        big = torch.full((2, 2), 7e4, dtype=dtype)
        with torch.no_grad():
            ranged = _compile(backend, lambda a: a * 1.5 - a)(big)
        precision[name] = "float16" if not torch.isfinite(ranged).all() else "bfloat16"
    if len(dtypes) < len(FLOATS):  # a failed call may break the runtime's next one (iree-turbine): a float32 call takes it
        x, w = _inputs(torch.float32)
        try:
            with torch.no_grad():
                _compile(backend)(x, w)
        except Exception:
            pass
    return tuple(d for d in FLOATS if d in dtypes), precision


@torch.library.custom_op("dedup_harness::probe_unknown", mutates_args=())
def _unknown(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_unknown.register_fake
def _(x):
    return torch.empty_like(x)


def _seeded(backend: Backend) -> bool:
    """Whether compiled random ops draw what eager draws under the same seed."""
    def draw(a):
        return torch.nn.functional.dropout(a, 0.5) + torch.rand_like(a)

    def seeded_call():
        torch.manual_seed(0)
        return compiled(x)

    x = torch.ones(64)
    compiled = _compile(backend, draw)
    with torch.no_grad():
        torch.manual_seed(0)
        expected = draw(x)
        actual = _twice(seeded_call)
    if actual is None:  # no random op ran: none is drawn (no value could be compared)
        return False
    return isinstance(actual, torch.Tensor) and actual.shape == expected.shape and torch.allclose(
        actual.float(), expected.float(), atol=1e-2)


def _rejects(backend: Backend) -> bool:
    try:
        with torch.no_grad():
            _compile(backend, lambda a: _unknown(a) + 1)(torch.ones(4))
    except Exception:
        return True
    return False


def runs_probe(spec: str) -> bool:
    """Whether the backend compiles and runs the probe right now (torch's own: assumed)."""
    backend = resolve(spec)
    if backend.name in BUILTIN:
        return True
    x, w = _inputs(torch.float32)
    with torch.no_grad():
        y = _compile(backend)(x, w)
    torch._dynamo.reset()
    return isinstance(y, torch.Tensor) and _errors(y, x, w)[0] <= AS_GIVEN["bfloat16"]


_PROBED: dict[str, BackendCapabilities] = {}


def probe(spec: str) -> BackendCapabilities:
    """The backend's capabilities, asked once per process; ``BackendError``
    (one line) if it compiles nothing."""
    if spec not in _PROBED:
        _PROBED[spec] = _probe(spec)
    return _PROBED[spec]


def probe_isolated(spec: str, timeout: float = 300.0) -> BackendCapabilities:
    """``probe`` in a child process: a backend that aborts or hangs on the
    probe takes down the child, not the campaign. Such a backend is taken as
    it presents itself (training, full precision), which the oracles then judge.
    The child is forked from this process's forkserver (harness.warm), which
    a campaign has started already with torch imported."""
    from . import warm

    if spec in _PROBED:
        return _PROBED[spec]
    stated = declared(resolve(spec))  # a bad name is the caller's one line, without a child
    if stated is not None:  # nothing to probe: torch's own, or a backend that says what it can do
        _PROBED[spec] = stated
        return stated
    ctx = warm.forked_context()
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_probe_child, args=(spec, theirs), daemon=True)
    child.start()
    theirs.close()
    answered = ours.poll(timeout)  # an answer, or the end of the pipe: the child died first
    try:
        answer = ours.recv() if answered else None
    except EOFError:
        answer = None
    child.join(30 if answered else 0)  # the forkserver reports a child's end a moment after its pipe closes
    if child.is_alive():
        child.kill()
        child.join()
    why = f"the probe exited {child.exitcode}" if answered else f"the probe ran past {timeout:.0f} s"
    ours.close()
    if answer is not None and "error" in answer:
        raise BackendError(answer["error"])
    if answer is None:
        caps = BackendCapabilities(resolve(spec).name, training=True, how_precision=f"not probed: {why}")
    else:
        caps = BackendCapabilities.from_dict(answer)
    _PROBED[spec] = caps
    return caps


def remember(spec: str, path) -> None:
    """Take ``spec``'s capabilities from ``path`` (a campaign folder's record
    of them) where it exists: a resumed campaign is not probed again."""
    import json

    if path is not None and path.exists() and spec not in _PROBED:
        answer = json.loads(path.read_text())
        if answer.get("name") == resolve(spec).name:
            _PROBED[spec] = BackendCapabilities.from_dict(answer)


def _probe_child(spec: str, conn) -> None:
    """The child side of ``probe_isolated``: the capabilities as a dict, or the error."""
    from dataclasses import asdict

    try:
        conn.send(asdict(probe(spec)))
    except BackendError as e:
        conn.send({"error": str(e)})


def _probe(spec: str) -> BackendCapabilities:
    backend = resolve(spec)
    known = declared(backend)
    if known is not None:
        return known
    grad = torch.is_grad_enabled()
    try:
        try:
            x, w = _inputs(torch.float32)
            with torch.no_grad():
                _compile(backend)(x, w)
        except Exception as e:
            raise BackendError(f"backend {spec!r} compiles nothing: a two-op probe raised {_first_line(e)}") from e
        try:
            training, why = _training(backend)
        except Exception as e:  # compiles inference only
            training, why = False, f"it fails on inputs that require grad ({_first_line(e)})"
        seeded, rejects = _seeded(backend), _rejects(backend)
        dtypes, precision = _precision(backend)  # last: a dtype a runtime fails on may break its next call
        return BackendCapabilities(backend.name, training, why, dtypes, precision, "detected", rejects, seeded)
    finally:
        torch.set_grad_enabled(grad)
        torch._dynamo.reset()


def resolve_mode(spec: str, mode: str = "auto") -> str:
    """The mode a campaign runs ``spec`` in: ``mode`` as asked, "auto" by what
    the backend can do ("inference" for either inference mode, drawn per
    program); a training mode on an inference-only backend is an error."""
    if mode not in (*MODES, "auto", "inference"):
        raise BackendError(f"unknown mode {mode!r}: use auto, train, inference, {', '.join(INFERENCE_MODES)}")
    caps = probe(spec)
    if mode == "train" and not caps.training:
        raise BackendError(f"--mode train: backend {spec!r} cannot train: {caps.why_not_training}")
    if mode == "auto":
        return "train" if caps.training else "inference"
    return mode


def program_mode(mode: str, seed: int) -> str:
    """The mode one program runs in: "inference" draws no_grad or
    inference_mode by the program's seed (both are how users run inference)."""
    return INFERENCE_MODES[seed % 2] if mode == "inference" else mode


def unfit(program: Program, caps: BackendCapabilities) -> str:
    """Why ``program`` tests nothing of this backend ("" if it fits): a dtype
    it does not run, or a rounding-sensitive op where it computes lower."""
    if set(caps.dtypes) >= set(FLOATS) and not caps.precision and caps.seeded_random:
        return ""  # every program fits (torch's own backends): nothing to check
    used = dtypes_used(program)
    missing = sorted(d for d in used if d in FLOATS and d not in caps.dtypes)
    if missing:
        return f"dtype:{missing[0]}"
    if not caps.seeded_random:
        drawn = sorted({s.op for b in program.blocks() for s in b.body if OPS[s.op].random})
        if drawn:
            return f"random:{drawn[0]}"
    if caps.precision and any(d in caps.precision for d in used):
        sensitive = sorted({s.op for b in program.blocks() for s in b.body if s.op in ROUNDING_SENSITIVE})
        if sensitive:
            return f"rounding:{sensitive[0]}"
    return ""
