"""Repro: KI-116: Eager torch.cond recomputes its branch for the backward without the forward's RNG state: a dropout inside gets another mask, the input gradient is wrong

Exit status 1: reproduced; 0: not reproduced; 3: fails, but differently; 2: the repro itself failed. Needs only torch."""
import os as _os
import sys as _sys
import traceback as _traceback


def _error_before_check(kind, value, tb):
    _traceback.print_exception(kind, value, tb)
    print("ERROR: the repro itself failed (exit 2), not the failure it checks for", flush=True)
    _sys.stderr.flush()
    _os._exit(2)


_sys.excepthook = _error_before_check
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, s0, s1):
        v0 = torch.logical_not(x > 0)
        v1 = F.dropout(x, p=0.25, training=True)
        v2 = v1.var(dim=s0, keepdim=s1, correction=0)
        v3 = (x * 2 if torch.is_grad_enabled() else x - 1)
        v4 = torch.copysign(v1, -1.0)
        v5 = torch.cat([v4, v1], dim=-3)
        v6 = x + v5.float().mean().type_as(x)
        return v6


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        h = x
        outs = []
        for s0, s1 in [(-2, False), (-2, False)]:
            outs.append(torch.cond(h.sum() > 0, lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1), lambda _u: (lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1))(_u * 0.5), (h,)))
        for s0, s1 in [(-2, False), (-2, False), (-3, False)]:
            h = torch.cond(h.sum() > 0, lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1), lambda _u: (lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1))(_u * 0.5), (h,))
            if h.detach().abs().amax() >= 0:
                h = h + 1.0
            else:
                h = h - 1.0
        return {"h": h, "outs": outs}


def make_inputs(device="cpu"):
    x = torch.randn((2, 5, 5), dtype=torch.bfloat16, device=device).requires_grad_(True)
    return [x]


# ---- how this repro compiles: the backend and the torch config of the run ----
import importlib
import os
import sys

import torch._dynamo

BACKEND = 'eager'  # a torch backend name, or package.module:callable
TORCH_CONFIG = {}


def backend():
    if ":" not in BACKEND:
        return BACKEND
    sys.path.append(os.getcwd())  # a plugin imports as the campaign imported it: run from the same folder
    module, _, name = BACKEND.partition(":")
    return getattr(importlib.import_module(module), name)


def configure(dedup):
    """Deduplication on or off, and the torch config the finding was made under."""
    import torch._functorch.config
    import torch._inductor.config

    torch._dynamo.config.use_graph_deduplication = dedup
    sections = {"dynamo": torch._dynamo.config, "inductor": torch._inductor.config, "functorch": torch._functorch.config}
    for key, value in TORCH_CONFIG.items():
        section, _, name = key.partition(".")
        setattr(sections[section], name, value)


# ---- the door: how the program is called (the harness's own code, torch only) ----
DOOR = 'control_flow:cond'
BACKWARD = True
# True: the finding is the door's operator run in eager disagreeing with its
# plain-Python equivalent (no compile involved).
OPERATOR = False
# Where eager is the door's plain-Python equivalent (its operator compiles even in eager).
REFERENCE_SOURCE = 'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n    def forward(self, x, s0, s1):\n        v0 = torch.logical_not(x > 0)\n        v1 = F.dropout(x, p=0.25, training=True)\n        v2 = v1.var(dim=s0, keepdim=s1, correction=0)\n        v3 = (x * 2 if torch.is_grad_enabled() else x - 1)\n        v4 = torch.copysign(v1, -1.0)\n        v5 = torch.cat([v4, v1], dim=-3)\n        v6 = x + v5.float().mean().type_as(x)\n        return v6\n\n\nclass Program(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.block = Block()\n\n    def forward(self, x):\n        h = x\n        outs = []\n        for s0, s1 in [(-2, False), (-2, False)]:\n            outs.append(((lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1))(h) if h.sum() > 0 else (lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1))(h * 0.5)))\n        for s0, s1 in [(-2, False), (-2, False), (-3, False)]:\n            h = ((lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1))(h) if h.sum() > 0 else (lambda _t, s0=s0, s1=s1, self=self: self.block(_t, s0, s1))(h * 0.5))\n            if h.detach().abs().amax() >= 0:\n                h = h + 1.0\n            else:\n                h = h - 1.0\n        return {"h": h, "outs": outs}\n\n\ndef make_inputs(device="cpu"):\n    x = torch.randn((2, 5, 5), dtype=torch.bfloat16, device=device).requires_grad_(True)\n    return [x]\n'
import functools

import torch
from torch.utils._pytree import tree_flatten


def _door_floats(out):
    return [x for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor) and x.is_floating_point()]


def _door_weights(x, i):
    """Fixed, uneven cotangents, computed inside the traced function (a
    torch.Generator there is an opaque object Dynamo refuses)."""
    w = torch.arange(x.numel(), dtype=torch.float32, device=x.device).mul(0.7).add(i).sin()
    return w.reshape(x.shape).to(x.dtype)


def _door_scalar(out, like):
    total = like.sum() * 0
    for i, x in enumerate(_door_floats(out)):
        total = total + (x * _door_weights(x, i)).sum()
    return total


def _door_flat(out, like):
    parts = _door_floats(out)
    if not parts:
        return like.reshape(-1) * 0
    dtype = functools.reduce(torch.promote_types, [p.dtype for p in parts])
    return torch.cat([p.reshape(-1).to(dtype) for p in parts])


def _door_batched(t):
    if not isinstance(t, torch.Tensor):
        return t
    b = torch.stack([t.detach(), t.detach() * -0.5 + 0.25]) if t.is_floating_point() else torch.stack([t, t])
    return b.requires_grad_(t.requires_grad)


def _door_grad(fn, owner, inputs):
    return (lambda x, *rest: torch.func.grad(lambda x0: _door_scalar(fn(x0, *rest), x0))(x)), owner, inputs, []


def _door_vjp(fn, owner, inputs):
    def call(x, *rest):
        out, pull = torch.func.vjp(lambda x0: tuple(_door_floats(fn(x0, *rest))), x)
        return out, pull(tuple(_door_weights(o, i) for i, o in enumerate(out)))

    return call, owner, inputs, []


def _door_jacrev(fn, owner, inputs):
    return (lambda x, *rest: torch.func.jacrev(lambda x0: _door_flat(fn(x0, *rest), x0))(x)), owner, inputs, []


def _door_vmap(fn, owner, inputs):
    return torch.func.vmap(fn), owner, [_door_batched(t) for t in inputs], []


def _door_functional_call(fn, owner, inputs):
    """The module called with copies of its parameters, passed as extra inputs."""
    k, mine = len(inputs), list(owner.named_parameters())
    copies = [p.detach().clone().requires_grad_(p.requires_grad) for _, p in mine]
    names = [n for n, _ in mine]
    return (lambda *a: torch.func.functional_call(owner, dict(zip(names, a[k:])), tuple(a[:k]))), owner, \
        [*inputs, *copies], [f"param:{n}" for n in names]


DOOR_TRANSFORMS = {
    "transform:grad": _door_grad,
    "transform:vjp": _door_vjp,
    "transform:jacrev": _door_jacrev,
    "transform:vmap": _door_vmap,
    "transform:functional_call": _door_functional_call,
}


def _door_export(door, model, inputs, compile_fn):
    ep = torch.export.export(model, tuple(inputs), strict=door == "export:strict")
    if door == "export:unflatten":
        m = torch.export.unflatten(ep)
        return m, m, ep
    m = ep.module()
    return (compile_fn(m) if door == "export:compile" else m), m, ep


def door_through(door, model, inputs, compile_fn=None, exported=None):
    """``exported``, a list, receives the ExportedProgram of an export door."""
    if door in DOOR_TRANSFORMS:
        fn, owner, inputs, extra = DOOR_TRANSFORMS[door](model, model, inputs)
        return (compile_fn(fn) if compile_fn is not None else fn), owner, inputs, extra
    if door.startswith("export:") and compile_fn is not None:
        fn, owner, ep = _door_export(door, model, inputs, compile_fn)
        if exported is not None:
            exported.append(ep)
        return fn, owner, inputs, []
    return (compile_fn(model) if compile_fn is not None else model), model, inputs, []


def door_mark(door, inputs):
    """mark_dynamic / maybe_mark_dynamic on the batch dimension of every input that has it."""
    fn = {"dynamic:mark": "mark_dynamic", "dynamic:maybe_mark": "maybe_mark_dynamic"}.get(door)
    if fn is None or not inputs or not isinstance(inputs[0], torch.Tensor) or not inputs[0].dim():
        return
    batch = inputs[0].shape[0]
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == batch and batch >= 2:
            getattr(torch._dynamo, fn)(t, 0)


# Dynamo settings a door adds to the run's, and compile options it sets.
DOOR_CONFIG = {
    "dynamic:unbacked": {"dynamo.capture_scalar_outputs": True, "dynamo.capture_dynamic_output_shape_ops": True},
}
DOOR_COMPILE = {
    "dynamic:dynamic": {"dynamic": True},
    "dynamic:unbacked": {"dynamic": True},
}
# ---- driver: exits 1 when the failure reproduces, 0 when it does not ----
import sys
import tempfile
import traceback

from torch.utils._pytree import tree_leaves

DEDUP = False
SEED = 35728
COMPILE_KWARGS = {**{'fullgraph': False}, **DOOR_COMPILE.get(DOOR, {})}
TORCH_CONFIG.update(DOOR_CONFIG.get(DOOR, {}))
# Tolerances by dtype, as the harness's oracles judge (oracles.tolerance: PyTorch's
# benchmark accuracy checker), never tighter than the program's least precise dtype's.
TOLERANCE = {'torch.float64': 1e-07, 'torch.float32': 0.0001, 'torch.float16': 0.01, 'torch.bfloat16': 0.016}
ATOL = RTOL = 0.016  # the least precise dtype's


def tol(dtype):
    return max(TOLERANCE.get(str(dtype), TOLERANCE["torch.float32"]), ATOL)


SIGNED_ZEROS = False  # the program decides the sign of its zeros (no summing op)


def bad(name, exp, act, ref):
    """What is wrong with ``act`` as a compiled ``exp`` (None: nothing). NaN,
    infinities and signed zeros that eager and its float64 run agree on must
    match exactly; where the two disagree it is float noise, left out."""
    if (exp is None) != (act is None):
        return f"expected {'None' if exp is None else 'a tensor'}, got {'None' if act is None else 'a tensor'}"
    if exp is None:
        return None
    if isinstance(exp, str):  # what outputs share storage with
        return None if exp == act else f"expected {exp}; got {act}"
    mine = [None if type(t).__module__.split(".")[0] == "torch" else type(t) for t in (exp, act)]
    if mine[0] is not mine[1]:  # a Tensor subclass the program defined is compared by type, then by values
        return f"expected {type(exp).__name__}, got {type(act).__name__}"
    exp, act = [t.as_subclass(torch.Tensor) if m is not None else t for t, m in zip((exp, act), mine)]
    ref = ref.as_subclass(torch.Tensor) if isinstance(ref, torch.Tensor) and type(ref).__module__.split(".")[0] != "torch" else ref
    if exp.dtype != act.dtype or exp.shape != act.shape:
        return f"expected {exp.dtype}{tuple(exp.shape)}, got {act.dtype}{tuple(act.shape)}"
    if not (exp.is_floating_point() or exp.is_complex()):
        return None if torch.equal(exp, act) else "exact values differ"
    if exp.is_complex():
        exp, act = torch.view_as_real(exp.resolve_conj()), torch.view_as_real(act.resolve_conj())
        ref = torch.view_as_real(ref.resolve_conj()) if ref is not None and ref.is_complex() else None
    e, a = exp.flatten().double(), act.flatten().double()
    r = ref.flatten().double() if ref is not None and ref.shape == exp.shape and ref.is_floating_point() else None

    def at(mask, what):
        i = int(mask.nonzero()[0])
        f64 = f" (float64 {r[i].item():.6g})" if r is not None else ""
        return f"{what}: expected {e[i].item():.6g}, got {a[i].item():.6g}{f64} at flat index {i}"

    if r is None:
        keep = e.isfinite() & a.isfinite()  # no referee: edge values decide nothing
    else:
        if (e.isnan() & r.isnan() & ~a.isnan()).any():
            return at(e.isnan() & r.isnan() & ~a.isnan(), "NaN lost")
        if (e.isinf() & (e == r) & (a != e)).any():
            return at(e.isinf() & (e == r) & (a != e), "infinity lost")
        both = e.isfinite() & r.isfinite()
        wild = both & ~a.isfinite() & ~(e.abs() > torch.finfo(exp.dtype).max / 4)
        if wild.any():
            return at(wild, "non-finite where eager and float64 are finite")
        zero = (e == 0) & (r == 0) & (e.signbit() == r.signbit()) & (a == 0) & (a.signbit() != e.signbit())
        if SIGNED_ZEROS and zero.any():
            return at(zero, "sign of zero")
        keep = both & a.isfinite()
    e, a = e[keep], a[keep]
    r = r[keep] if r is not None else e
    t = tol(exp.dtype)
    if torch.allclose(e, a, atol=t, rtol=t):
        return None
    rmse = lambda d: d.pow(2).mean().sqrt().item() if d.numel() else 0.0  # noqa: E731
    if ref is not None and (a - r).abs().max().item() <= 3 * (e - r).abs().max().item() + t \
            and rmse(a - r) <= 3 * rmse(e - r) + t / 10:
        return None
    i = int((a - e).abs().argmax())
    return f"expected {e[i].item():.6g}, got {a[i].item():.6g} (float64 {r[i].item():.6g})"


import fnmatch
import re

# The failure this repro checks for: a crash (a glob over its normalized
# "Type: message"), "" for wrong values (a crash then fails differently:
# exit 3), None for any failure.
EXPECT_CRASH = ''

def normalize(message: str) -> str:
    """Drop what varies between hits of one bug: numbers, names, addresses,
    the op a fake-tensor check met, tensor reprs."""
    message = re.sub(r"\baten\.\w+(\.\w+)?", "aten.OP", message)
    message = re.sub(r"\b(\w*Tensor|tensor)\(.*", "TENSOR(...)", message)  # a repr runs to the end: it nests
    message = re.sub(r"<([\w.]+) object at 0x[0-9a-fA-F]+>", r"<\1>", message)  # an object's repr names its type
    message = re.sub(r"0x[0-9a-fA-F]+", "ADDR", message)
    message = re.sub(r"/[\w./-]+\.py", "FILE", message)
    message = re.sub(r"\b(gp_)?[0-9a-f]{16}\b", "ID", message)
    message = re.sub(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", "N", message)
    return message[:200]

def first_line(exc: BaseException) -> str:
    """The line of an exception's message that names the error (rendered
    into crash repros too, so both read a crash alike)."""
    import os
    import traceback

    text = str(exc).split("from user code:")[0]  # Dynamo appends where in the user's code
    hints = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context")  # and how to log more (2.10)
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith(hints)]
    message = lines[0] if lines else ""
    if message.endswith("raised:") and len(lines) > 1:  # BackendCompilerFailed: the error is on the next line
        message = f"{message} {lines[1]}"
    if message.endswith("C++ compile error"):  # inductor's C++ build failed: the compiler's first error says which
        import re

        found = re.search(r":\d+:\d+: ((?:fatal |internal compiler )?error: .*)", text)
        message = f"{message}: {found.group(1).strip()}" if found else message
    if message.endswith("raised:") or not message:  # a bare assert: name where it fired
        inner = exc
        while inner.__cause__ is not None:
            inner = inner.__cause__
        frames = traceback.extract_tb(inner.__traceback__)
        where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].name}" if frames else "?"
        message = f"{message} {type(inner).__qualname__} in {where}".strip()
    return message


def crashed(e, what):
    """The exit status for crash ``e`` of ``what``: 1 when it is the expected one."""
    traceback.print_exc()
    # the backend by any name (this script's may be a counting wrapper): the expected glob says backend=*
    got = normalize(re.sub(r"backend='[^']*'", "backend=*", f"{type(e).__qualname__}: {first_line(e)}"))
    if EXPECT_CRASH is not None and not (EXPECT_CRASH and fnmatch.fnmatchcase(got, EXPECT_CRASH)):
        print(f"FAILS DIFFERENTLY (exit 3): expected {EXPECT_CRASH or 'wrong values'}, got {got}")
        return 3
    print(f"REPRODUCED: {what} raised {got} (torch {torch.__version__})")
    return 1


def wrong_values(what):
    """The exit status for wrong values (``what`` went wrong): 1, or 3 where a
    crash was expected (the crash is gone, the values are wrong: another failure)."""
    if EXPECT_CRASH:
        print(f"FAILS DIFFERENTLY (exit 3): expected {EXPECT_CRASH}, but the compiled program ran with wrong values")
        return 3
    print(f"REPRODUCED: {what} (torch {torch.__version__})")
    return 1


def program_class(door_source):
    if door_source or not REFERENCE_SOURCE:
        return Program
    namespace = {}
    exec(compile(REFERENCE_SOURCE, "reference.py", "exec"), namespace)
    return namespace["Program"]


def values(fn, owner, inputs, n_inputs):
    """One call through the door: outputs, inputs and buffers after it, gradients."""
    outs = [o for o in tree_leaves(fn(*inputs)) if isinstance(o, torch.Tensor)]
    diff = [(i, o) for i, o in enumerate(outs) if o.requires_grad]
    if BACKWARD and diff:
        cots = []
        for i, o in diff:
            g = torch.Generator().manual_seed(1000 + i)
            cots.append(torch.randn(o.shape, generator=g).to(o.dtype))
        torch.autograd.backward([o for _, o in diff], cots)
    got = {f"output[{i}]": o.detach().clone() for i, o in enumerate(outs)}
    got.update({f"output[{i}].requires_grad": torch.tensor(o.requires_grad) for i, o in enumerate(outs)})
    got.update({f"input {i} after the call": t.detach().clone() for i, t in enumerate(inputs[:n_inputs])})
    got.update({f"buffer {n} after the call": b.detach().clone() for n, b in owner.named_buffers()})
    got.update({f"grad[input {i}]": t.grad.clone() if t.grad is not None else None
                for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.requires_grad})
    got.update({f"grad[{n}]": p.grad.clone() if p.grad is not None else None for n, p in owner.named_parameters()})
    return got


def as64(inputs):
    return [t.detach().double().requires_grad_(t.requires_grad) if t.is_floating_point() else t for t in inputs]


def run(compiled, float64=False, operator=False):
    """Every call of the door, in order, on one model: {"call k: value": tensor}."""
    torch.manual_seed(SEED)
    cls = program_class(compiled or operator)
    model = cls()
    inputs = make_inputs()
    if float64:
        model, inputs = model.double(), as64(inputs)
    compile_fn = None
    if compiled:
        torch._dynamo.reset()
        configure(DEDUP)
        door_mark(DOOR, inputs)
        chosen = backend()  # resolved before the door is entered (export runs before any compile)
        compile_fn = lambda m: torch.compile(m, backend=chosen, **COMPILE_KWARGS)
    n = len(inputs)
    fn, owner, inputs, _ = door_through(DOOR, model, inputs, compile_fn)
    got = {f"call 0: {k}": v for k, v in values(fn, owner, inputs, n).items()}
    return got


def bitwise(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.detach().contiguous().reshape(-1).view(torch.uint8), b.detach().contiguous().reshape(-1).view(torch.uint8))


def compare(expected, actual, reference, what):
    failures = [(k, bad(k, expected[k], actual.get(k), reference.get(k))) for k in expected]
    failures = [(k, m) for k, m in failures if m]
    for k, m in failures:
        print(f"{k}: {m}")
    return failures


def main():
    expected = run(compiled=False)
    try:
        reference = run(compiled=False, float64=True)
    except Exception:
        reference = {}
    try:
        actual = run(compiled=not OPERATOR, operator=OPERATOR)
    except Exception as e:
        return crashed(e, f"{DOOR} in eager" if OPERATOR else
                       f"torch.compile through {DOOR} (backend={BACKEND!r}, deduplication {DEDUP})")
    failures = compare(expected, actual, reference, "compiled")
    if failures:
        return wrong_values(f"{len(failures)} value(s) of {DOOR} run eagerly differ from its plain-Python equivalent"
                            if OPERATOR else f"{len(failures)} value(s) through {DOOR} differ from eager")
    print(f"not reproduced: compiled through {DOOR} matches eager (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
