"""Repro: KI-128: x.polygamma_(n), compiled through AOTAutograd: functionalization takes aten::polygamma_ for a custom operator (its schema's argument order differs from polygamma's) and refuses it

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


def block(c0_0):
    v0 = c0_0.clone().polygamma_(1)
    return v0


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, c0_0):
        h = c0_0
        h = block(h)
        return h


def make_inputs(device="cpu"):
    c0_0 = torch.tensor((-8.478373527526855, -1.765825867652893, -4.3228044509887695, -2.400455951690674, -7.950586795806885, 3.611605167388916, -8.067646980285645, -0.5734938383102417, 3.1285104751586914, -3.033684730529785, 5.106744766235352, 1.135137677192688, 4.947308540344238, 5.774446487426758, -3.973021984100342, 3.270799398422241, -3.893850803375244, 2.8211474418640137, -4.702395439147949, 4.163121223449707, 1.822007417678833, -3.522088050842285, -4.414461135864258, 2.3285136222839355, 8.397199630737305), dtype=torch.float32, device=device).reshape((5, 5)).requires_grad_(False)
    return [c0_0]


# ---- how this repro compiles: the backend and the torch config of the run ----
import importlib
import os
import sys

import torch._dynamo

BACKEND = 'aot_eager'  # a torch backend name, or package.module:callable
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


# ---- driver: exits 1 when the failure reproduces, 0 when it does not ----
import sys
import traceback

from torch.utils._pytree import tree_leaves

DEDUP = False
SEED = 216
COMPILE_KWARGS = {'fullgraph': False}
# Tolerances by dtype, as the harness's oracles judge (oracles.tolerance: PyTorch's
# benchmark accuracy checker), never tighter than the program's least precise dtype's.
TOLERANCE = {'torch.float64': 1e-07, 'torch.float32': 0.0001, 'torch.float16': 0.01, 'torch.bfloat16': 0.016}
ATOL = RTOL = 0.0001  # the least precise dtype's


def tol(dtype):
    return max(TOLERANCE.get(str(dtype), TOLERANCE["torch.float32"]), ATOL)


def run(compiled, float64=False):
    torch.manual_seed(SEED)
    model = Program()
    inputs = make_inputs()
    if float64:
        model = model.double()
        inputs = [t.detach().double().requires_grad_(t.requires_grad) if t.is_floating_point() else t
                  for t in inputs]
    fn = model
    if compiled:
        torch._dynamo.reset()
        configure(DEDUP)
        fn = torch.compile(model, backend=backend(), **COMPILE_KWARGS)
    outs = [o for o in tree_leaves(fn(*inputs)) if isinstance(o, torch.Tensor)]
    diff = [(i, o) for i, o in enumerate(outs) if o.requires_grad]
    if diff:
        cots = []
        for i, o in diff:
            g = torch.Generator().manual_seed(1000 + i)
            cots.append(torch.randn(o.shape, generator=g).to(o.dtype))
        torch.autograd.backward([o for _, o in diff], cots)
    values = {f"output[{i}]": o.detach() for i, o in enumerate(outs)}
    values["output aliasing"] = aliasing(outs, inputs)
    values.update({f"output[{i}].requires_grad": torch.tensor(o.requires_grad) for i, o in enumerate(outs)})
    values.update({f"input {i} after the run": t.detach() for i, t in enumerate(inputs)})
    values.update({f"buffer {n} after the run": b for n, b in model.named_buffers()})
    values.update({f"grad[input {i}]": t.grad for i, t in enumerate(inputs) if t.requires_grad})
    values.update({f"grad[{n}]": p.grad for n, p in model.named_parameters()})
    return values


def aliasing(outs, inputs):
    """What each output shares storage with (an input, an earlier output, or nothing): what a write
    through it changes."""
    def key(t):
        return t.untyped_storage().data_ptr() if t.layout == torch.strided and t.untyped_storage().nbytes() else None

    owners = {key(t): f"input {i}" for i, t in reversed(list(enumerate(inputs))) if key(t) is not None}
    shares = []
    for i, o in enumerate(outs):
        shares.append(owners.get(key(o), "nothing") if key(o) is not None else "nothing")
        if key(o) is not None:
            owners.setdefault(key(o), f"output[{i}]")
    return ", ".join(f"output[{i}] shares storage with {s}" for i, s in enumerate(shares))


SIGNED_ZEROS = True  # the program decides the sign of its zeros (no summing op)


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
EXPECT_CRASH = 'BackendCompilerFailed: backend=* raised: RuntimeError: Found a custom (non-ATen) operator whose output has alias annotations: aten::polygamma_*'

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

def main():
    expected = run(compiled=False)
    try:
        reference = run(compiled=False, float64=True)
    except Exception:
        reference = {}
    try:
        actual = run(compiled=True)
    except Exception as e:
        return crashed(e, f"torch.compile(backend={BACKEND!r}, deduplication {DEDUP})")
    failures = [(k, bad(k, expected[k], actual.get(k), reference.get(k))) for k in expected]
    failures = [(k, m) for k, m in failures if m]
    for k, m in failures:
        print(f"{k}: {m}")
    if failures:
        return wrong_values(f"{len(failures)} value(s) differ from eager")
    print(f"not reproduced: compiled matches eager (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
