"""Repro: cudagraph:crash:cudagraphs:replay:runtime:RuntimeError: The size of tensor a (N) must match the size of tensor b (N) at non-singleton dimension N

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


AUTOGRAD_TRACE = []  # (label, value) of every hook call: harness.execute reads and clears it around each run


def _pack_neg(t):
    return ("negated", t.neg() if t.is_floating_point() else t)


def _unpack_neg(packed):
    tag, t = packed
    return t.neg() if t.is_floating_point() else t


def autograd_context():
    return torch.autograd.graph.saved_tensors_hooks(_pack_neg, _unpack_neg)


def autograd_drive(outs, cots, leaves, inputs):
    torch.autograd.backward(outs, cots, inputs=leaves[::2])


class BlockMlp(nn.Module):
    def __init__(self):
        super().__init__()

    @torch.compiler.nested_compile_region
    def forward(self, x, given=None):
        v0 = x[..., slice(1, None, None)]
        v1 = x + v0.float().mean().type_as(x)
        v1 = v1 + given.sum() * 0.5
        return v1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.subs = nn.Sequential(BlockMlp(), BlockMlp())

    def forward(self, x):
        v0 = self.subs[0](x, given=x[x > 0])
        v1 = self.subs[1](x, given=x[x > 0])
        return v1


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x, t0):
        h = x
        outs = []
        for t, g, ac in [(x, True, True), (x, False, False), (t0, True, False)]:
            with torch.set_grad_enabled(g), torch.autocast("cpu", dtype=torch.bfloat16, enabled=ac):
                outs.append(self.block(t))
            if h.detach().abs().amax() >= 0:
                h = h + 1.0
            else:
                h = h - 1.0
        return (h, *outs)


def make_inputs(device="cpu"):
    x = torch.randn((3, 2), dtype=torch.float64, device=device).requires_grad_(True)
    t0 = torch.randn((4, 3), dtype=torch.float64, device=device).requires_grad_(True)
    return [x, t0]


# ---- how this repro compiles: the backend and the torch config of the run ----
import importlib
import os
import sys

import torch._dynamo

BACKEND = 'cudagraphs'  # a torch backend name, or package.module:callable
TORCH_CONFIG = {'functorch.donated_buffer': False}


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


def differing(expected, actual, reference):
    """(name, what is wrong) of each value either run has that ``bad`` finds wrong: a value only the compiled run
    has (a hook eager never calls) is compared too."""
    failures = [(k, bad(k, expected.get(k), actual.get(k), reference.get(k))) for k in dict.fromkeys([*expected, *actual])]
    return [(k, m) for k, m in failures if m]



# ---- driver: CUDA-graph replays; exits 1 when a call is wrong or a result goes stale ----
import sys
import traceback

from torch.utils._pytree import tree_leaves

DEDUP = True
SEED = 2586
COMPILE_KWARGS = {'fullgraph': False, 'dynamic': True}
# Tolerances by dtype, as the harness's oracles judge (oracles.tolerance: PyTorch's
# benchmark accuracy checker), never tighter than the program's least precise dtype's.
TOLERANCE = {'torch.float64': 1e-07, 'torch.float32': 0.0001, 'torch.float16': 0.01, 'torch.bfloat16': 0.016}
ATOL = RTOL = 0.01  # the least precise dtype's


def tol(dtype):
    return max(TOLERANCE.get(str(dtype), TOLERANCE["torch.float32"]), ATOL)


def cotangents(diff):
    """One cotangent per (index, output) of ``diff``."""
    return [torch.randn(o.shape, generator=torch.Generator().manual_seed(1000 + i), device="cpu").to(o.device, o.dtype)
            for i, o in diff]
DEVICE = 'cuda'
PLAN = {'calls': 4, 'backward': True, 'static_inputs': ('t0',), 'resize': None, 'mark_step': False, 'twice': False, 'input_names': ['x', 't0']}
PHASES = ['warmup', 'record', 'replay', 'replay']
CALL_SEEDS = [20583263, 20687992, 20792721, 20897450]
OVERWRITTEN = "overwritten by a subsequent run"  # PyTorch's documented error


def same(a, b):
    return torch.equal(a, b) or bool(torch.isclose(a, b, 0, 0, equal_nan=True).all())


def model(float64=False):
    torch.manual_seed(SEED)
    m = Program().to(DEVICE)
    return m.double() if float64 else m


def inputs_for(k, float64=False, second=False):
    torch.manual_seed(CALL_SEEDS[k] + second)
    resize = PLAN["resize"]
    xs = (make_resized_inputs if resize and k == resize["at"] else make_inputs)(DEVICE)
    if float64:
        xs = [t.detach().double().requires_grad_(t.requires_grad) if t.is_floating_point() else t for t in xs]
    return xs


def graphed_inputs(k, static, second=False):
    """Static inputs keep their first tensor and get each call's values in place."""
    xs = inputs_for(k, second=second)
    for i, name in enumerate(PLAN["input_names"]):
        if name not in PLAN["static_inputs"]:
            continue
        if name not in static:
            torch._dynamo.mark_static_address(xs[i])
            static[name] = xs[i]
        else:
            with torch.no_grad():
                static[name].copy_(xs[i])
            static[name].grad = None
        xs[i] = static[name]
    return xs


def call(fn, m, inputs):
    """Values of one call (copies) and the live tensors they were copied from."""
    for p in m.parameters():
        p.grad = None
    outs = [o for o in tree_leaves(fn(*inputs)) if isinstance(o, torch.Tensor)]
    values = {f"output[{i}]": o.detach().clone() for i, o in enumerate(outs)}
    live = [(f"output[{i}]", o) for i, o in enumerate(outs)]
    diff = [(i, o) for i, o in enumerate(outs) if o.requires_grad]
    if PLAN["backward"] and diff:
        cots = cotangents(diff)
        torch.autograd.backward([o for _, o in diff], cots)
    values.update({f"input {i} after the call": t.detach().clone() for i, t in enumerate(inputs)})
    values.update({f"buffer {n} after the call": b.detach().clone() for n, b in m.named_buffers()})
    grads = [(f"grad[input {i}]", t.grad) for i, t in enumerate(inputs)] + \
        [(f"grad[{n}]", p.grad) for n, p in m.named_parameters()]
    values.update({k: None if g is None else g.detach().clone() for k, g in grads})
    live += [(k, g) for k, g in grads if g is not None]
    return values, live


def main():
    problems = []
    configure(DEDUP)
    torch._dynamo.reset()
    eager_model, ref_model, graphed_model = model(), model(float64=True), model()
    graphed = torch.compile(graphed_model, backend=backend(), **COMPILE_KWARGS)
    static, pending = {}, []
    for k, phase in enumerate(PHASES):
        expected = call(eager_model, eager_model, inputs_for(k))[0]
        try:
            reference = call(ref_model, ref_model, inputs_for(k, float64=True))[0]
        except Exception:
            reference = {}
        xs = graphed_inputs(k, static)
        if PLAN["mark_step"]:
            torch.compiler.cudagraph_mark_step_begin()
        try:
            actual, live = call(graphed, graphed_model, xs)
        except Exception:
            traceback.print_exc()
            problems.append(f"call {k} ({phase}): the compiled call raised")
            break
        for name, m in differing(expected, actual, reference):
            problems.append(f"call {k} ({phase}) {name}: {m}")
        if PLAN["twice"]:  # a second call in the same step, other values: the first's results stay live
            expected = call(eager_model, eager_model, inputs_for(k, second=True))[0]
            try:
                reference = call(ref_model, ref_model, inputs_for(k, float64=True, second=True))[0]
            except Exception:
                reference = {}
            try:
                again = call(graphed, graphed_model, graphed_inputs(k, static, second=True))[0]
            except Exception:
                traceback.print_exc()
                problems.append(f"call {k} ({phase}): the second call of the step raised")
                break
            for name, m in differing(expected, again, reference):
                problems.append(f"call {k} ({phase}), second call of the step, {name}: {m}")
            for name, t in live:
                try:
                    now = t.detach().clone()
                except RuntimeError as e:
                    problems.append(f"{name} of call {k}: unreadable after a second call in the same step: {e}")
                    continue
                if not same(now, actual[name]):
                    problems.append(f"{name} of call {k} changed after a second call in the same step")
        for j, name, t, before in pending:
            try:
                now = t.detach().clone()
            except RuntimeError as e:
                if OVERWRITTEN not in str(e):
                    problems.append(f"{name} of call {j}: reading it after call {k} raised {e}")
                continue
            if not same(now, before):
                change = (now.double() - before.double()).abs().max().item()
                problems.append(f"{name} of call {j} changed by {change:.3g} when call {k} ran, "
                                f"and reading it raised no error")
        pending = [(k, name, t, actual[name]) for name, t in live]
    for p in problems:
        print(p)
    if problems:
        print(f"REPRODUCED: {len(problems)} problem(s) over {len(PHASES)} calls on {DEVICE} (torch {torch.__version__})")
        return 1
    print(f"not reproduced: every call matches eager and no result went stale (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
