"""Repro: KI-020: Graph deduplication moves deduplicated regions past torch.set_default_dtype calls: factory ops in them run under another default dtype

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


def block(x):
    v0 = x * torch.full((4, 8), 2.0, device=x.device)
    v1 = v0.abs().pow(3)
    v2 = x + v1.type_as(x)
    return v2


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        h = x
        for i in range(3):
            torch.set_default_dtype(torch.float64)
            h = h + block(h)
            torch.set_default_dtype(torch.float32)
        return h


def make_inputs(device="cpu"):
    x = torch.randn((4, 8), dtype=torch.float32, device=device).requires_grad_(False)
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
    import torch._inductor.config

    torch._dynamo.config.use_graph_deduplication = dedup
    for key, value in TORCH_CONFIG.items():
        section, _, name = key.partition(".")
        setattr(torch._dynamo.config if section == "dynamo" else torch._inductor.config, name, value)


# ---- driver: exits 1 when the failure reproduces, 0 when it does not ----
import sys
import traceback

from torch.utils._pytree import tree_leaves

DEDUP = True
SEED = 0
COMPILE_KWARGS = {'fullgraph': False}
ATOL = RTOL = 0.0001


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
    values.update({f"output[{i}].requires_grad": torch.tensor(o.requires_grad) for i, o in enumerate(outs)})
    values.update({f"input {i} after the run": t.detach() for i, t in enumerate(inputs)})
    values.update({f"buffer {n} after the run": b for n, b in model.named_buffers()})
    values.update({f"grad[input {i}]": t.grad for i, t in enumerate(inputs) if t.requires_grad})
    values.update({f"grad[{n}]": p.grad for n, p in model.named_parameters()})
    return values




# ---- driver: dedup on vs off on the same backend; exits 1 when they disagree ----
BITWISE = True


def same(e, a):
    if e.dtype != a.dtype or e.shape != a.shape:
        return False
    if not e.is_floating_point():
        return torch.equal(e, a)
    if BITWISE:
        return torch.equal(torch.isnan(e), torch.isnan(a)) and torch.equal(e.nan_to_num(), a.nan_to_num())
    return torch.allclose(e, a, atol=ATOL, rtol=RTOL, equal_nan=True)


def main():
    global DEDUP
    DEDUP = False
    try:
        expected = run(compiled=True)
    except Exception:
        traceback.print_exc()
        print("ERROR: the program fails to compile even without deduplication")
        return 2
    DEDUP = True
    try:
        actual = run(compiled=True)
    except Exception:
        traceback.print_exc()
        print(f"REPRODUCED: torch.compile(backend={BACKEND!r}) raises with deduplication only")
        return 1
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
        print(f"REPRODUCED: {len(differ)} value(s) differ with deduplication on vs off (torch {torch.__version__})")
        return 1
    print(f"not reproduced: deduplication on and off agree (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
