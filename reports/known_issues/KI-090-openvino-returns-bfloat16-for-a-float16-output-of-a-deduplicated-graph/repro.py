"""Repro: KI-090: OpenVINO returns a bfloat16 tensor for a float16 output once the graph holds invoke_subgraph calls (deduplication on), float16 with it off

Exit status 1: reproduced; 0: not reproduced; 3: fails, but differently; 2: the repro itself failed. Needs torch and the backend 'openvino' installed (a third-party backend's issue)."""
import os as _os
import sys as _sys
import traceback as _traceback


def _error_before_check(kind, value, tb):
    _traceback.print_exception(kind, value, tb)
    print("ERROR: the repro itself failed (exit 2), not the failure it checks for", flush=True)
    _sys.stderr.flush()
    _os._exit(2)


_sys.excepthook = _error_before_check
from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F



@dataclass
class Config:
    p0: object


CONFIG = Config(p0=slice(1, None, None))


def block(x, w0, w1, s0):
    v0 = torch.zeros_like(x) + x * 2
    v1 = F.gelu(x, approximate=s0)
    v2 = x[..., CONFIG.p0]
    v3 = v0.clone().add_(x)
    v4 = torch.ops.aten.linear.default(v0, w0, w1)
    return v4


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        self.w0 = nn.Parameter(torch.randn((2, 2)) / 2 ** 0.5)
        self.w1 = nn.Parameter(torch.randn((2,)) * 0.1)

    def forward(self, x):
        h = x
        outs = []
        for i in range(2):
            set_p0 = [slice(1, None, None), slice(None, -1, None)][i]
            CONFIG.p0 = set_p0
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=True):
                outs.append(block(x, self.w0, self.w1, 'none'))
        return {"h": h, "outs": outs}


def make_inputs(device="cpu"):
    x = torch.randn((5, 4, 2), dtype=torch.float32, device=device).requires_grad_(True)
    return [x]


# ---- how this repro compiles: the backend and the torch config of the run ----
import importlib
import os
import sys

import torch._dynamo

BACKEND = 'openvino'  # a torch backend name, or package.module:callable
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

DEDUP = True
SEED = 65535
COMPILE_KWARGS = {'fullgraph': True}
# Tolerances by dtype, as the harness's oracles judge (oracles.tolerance: PyTorch's
# benchmark accuracy checker), never tighter than the program's least precise dtype's.
TOLERANCE = {'torch.float64': 1e-07, 'torch.float32': 0.0001, 'torch.float16': 0.01, 'torch.bfloat16': 0.016}
ATOL = RTOL = 0.016  # the least precise dtype's


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
    values.update({f"input {i} after the run": t.detach() for i, t in enumerate(inputs)})
    values.update({f"buffer {n} after the run": b for n, b in model.named_buffers()})
    values.update({f"grad[input {i}]": t.grad for i, t in enumerate(inputs) if t.requires_grad})
    values.update({f"grad[{n}]": p.grad for n, p in model.named_parameters()})
    return values


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




# ---- driver: dedup on vs off on the same backend; exits 1 when they disagree ----
BITWISE = False


def same(e, a):
    if e.dtype != a.dtype or e.shape != a.shape:
        return False
    if not e.is_floating_point():
        return torch.equal(e, a)
    if BITWISE:
        return torch.equal(torch.isnan(e), torch.isnan(a)) and torch.equal(e.nan_to_num(), a.nan_to_num())
    return torch.allclose(e, a, atol=tol(e.dtype), rtol=tol(e.dtype), equal_nan=True)


def main():
    global DEDUP, BITWISE
    DEDUP = False
    try:
        expected = run(compiled=True)
    except Exception:
        traceback.print_exc()
        # another bug stops the backend without the pass: the program's own eager run is the reference
        print("note: the program fails to compile without deduplication; its eager run is the reference")
        BITWISE = False
        try:
            expected = run(compiled=False)
        except Exception:
            traceback.print_exc()
            print("ERROR: the program fails in eager")
            return 2
    DEDUP = True
    try:
        actual = run(compiled=True)
    except Exception as e:
        return crashed(e, f"torch.compile(backend={BACKEND!r}) with deduplication only")
    differ = []
    for k, e in expected.items():
        a = actual.get(k)
        if (e is None) != (a is None):
            differ.append(f"{k}: without dedup {'None' if e is None else 'a tensor'}, with dedup {'None' if a is None else 'a tensor'}")
        elif e is not None and not same(e, a):
            if e.shape != a.shape or e.dtype != a.dtype or not e.is_floating_point():
                differ.append(f"{k}: without dedup {e.dtype}{tuple(e.shape)}, with dedup {a.dtype}{tuple(a.shape)}")
                continue
            i = int((a.double() - e.double()).abs().nan_to_num(float("inf")).flatten().argmax())
            differ.append(f"{k}: without dedup {e.flatten()[i].item():.9g}, with dedup {a.flatten()[i].item():.9g} "
                          f"at flat index {i}")
    for line in differ:
        print(line)
    if differ:
        return wrong_values(f"{len(differ)} value(s) differ with deduplication on vs off")
    print(f"not reproduced: deduplication on and off agree (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        with torch.inference_mode():  # as the harness ran it: the backend runs forward-only
            status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
