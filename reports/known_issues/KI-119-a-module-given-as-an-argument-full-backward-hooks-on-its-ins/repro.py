"""Repro: KI-119: A module given as an argument, full backward hooks on its instances, the layer's calls under enable_grad inside the forward, the whole call under no_grad: the recompiled entry gives the given module's parameter a gradient eager does not

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
import types
import torch
import torch.nn as nn
import torch.nn.functional as F


class FloatSub(float):
    pass


AUTOGRAD_TRACE = []  # (label, value) of every hook call: harness.execute reads and clears it around each run


def _record(label, value):
    AUTOGRAD_TRACE.append((label, value.detach().clone() if isinstance(value, torch.Tensor) else None))


def _instances(root):
    """Every other instance of the program's own module classes, in module order."""
    own = [m for m in root.modules() if m is not root and type(m).__module__ == __name__]
    return own[::2]


def _module_hooks(root, kind):
    for i, m in enumerate(_instances(root)):
        label = f"module.{kind}[{i}]"
        if kind == "forward_pre":
            m.register_forward_pre_hook(lambda mod, args, label=label: _record(label, args[0] if args else None))
        elif kind == "forward":
            m.register_forward_hook(lambda mod, args, out, label=label: _record(label, out))
        elif kind == "forward_kwargs":
            m.register_forward_hook(lambda mod, args, kwargs, out, label=label: _record(label, out),
                                    with_kwargs=True, always_call=True)
        elif kind == "forward_replace":
            m.register_forward_hook(lambda mod, args, out: out * 2 if isinstance(out, torch.Tensor)
                                    and out.is_floating_point() else None)
        elif kind == "backward":
            m.register_full_backward_pre_hook(lambda mod, go, label=label: _record(label + ".pre", go[0]))
            m.register_full_backward_hook(lambda mod, gi, go, label=label: _record(label + ".post", go[0]))
        elif kind == "backward_replace":
            m.register_full_backward_pre_hook(lambda mod, go: tuple(None if g is None else g * 2 for g in go))


class Given(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w))

    def forward(self, x):
        return torch.tanh(x) * self.w


class GivenOther(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w))

    def forward(self, x):
        return torch.sigmoid(x) * self.w


def given_forward(self, x):
    return torch.sin(x) * self.w


class Block(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, s0, s1, given=None):
        v0 = F.layer_norm(x, (2,))
        v1 = x.clamp(min=s0, max=s1)
        v2 = v1 * v1
        v2 = given(v2)
        return [v2, v0]


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        self.m0_0 = Block()
        self.m0_1 = Block()
        self.m0_2 = Block()
        self.given = nn.ModuleList([Given(0.5), Given(-1.5), GivenOther(0.5), Given(0.5)])
        self.given[3].forward = types.MethodType(given_forward, self.given[3])
        _module_hooks(self, 'backward')

    def forward(self, x):
        h = x
        aux = []
        with torch.enable_grad():
            got = self.m0_0(h, s0=-0.5, s1=2.0, given=self.given[2])
            h = h + got[0]
            aux.append(got[1])
        h = h * 0.5
        with torch.enable_grad():
            got = self.m0_1(h, s0=-0.5, s1=FloatSub(2.0), given=self.given[2])
            h = h + got[0]
            aux.append(got[1])
        h = h * 0.5
        with torch.enable_grad():
            got = self.m0_2(h, s0=-1.0, s1=2.0, given=self.given[2])
            h = h + got[0]
            aux.append(got[1])
        h = h * 0.5
        return {"h": h, "aux": aux}


def make_inputs(device="cpu"):
    x = torch.randn((2,), dtype=torch.bfloat16, device=device).requires_grad_(True)
    return [x]


# ---- how this repro compiles: the backend and the torch config of the run ----
import importlib
import os
import sys

import torch._dynamo

BACKEND = 'aot_eager'  # a torch backend name, or package.module:callable
TORCH_CONFIG = {'dynamo.inline_single_use_invoke_subgraph': False}


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


# ---- driver: compile, call, make one change, call again; exits 1 when the
# second call crashes or disagrees with eager under the same change ----
import sys
import traceback

import torch._dynamo.testing
from torch.utils._pytree import tree_leaves

DEDUP = True
SEED = 848
COMPILE_KWARGS = {'fullgraph': False}
# Tolerances by dtype, as the harness's oracles judge (oracles.tolerance: PyTorch's
# benchmark accuracy checker), never tighter than the program's least precise dtype's.
TOLERANCE = {'torch.float64': 1e-07, 'torch.float32': 0.0001, 'torch.float16': 0.01, 'torch.bfloat16': 0.016}
ATOL = RTOL = 0.016  # the least precise dtype's


def tol(dtype):
    return max(TOLERANCE.get(str(dtype), TOLERANCE["torch.float32"]), ATOL)
CHANGE = 'whole call under grad=False'
# "values": reproduced when the second call is wrong; "recompile": when it
# recompiles although the change cannot alter the result
EXPECT = 'values'
SIGNED_ZEROS = False  # the program decides the sign of its zeros (no summing op)
APPLY = """
torch.set_grad_enabled(False)
"""
UNDO = """
torch.set_grad_enabled(True)
"""
# (apply, undo) of changes made and called before CHANGE, in order: a bug
# that needs a history (a float made dynamic by an earlier change)
BEFORE = []


def cell(fn, name):
    """The closure cell of ``fn`` (or of a function it wraps) holding ``name``."""
    todo = [fn]
    while todo:
        f = todo.pop()
        if name in f.__code__.co_freevars:
            return f.__closure__[f.__code__.co_freevars.index(name)]
        todo += [c.cell_contents for c in f.__closure__ or () if hasattr(c.cell_contents, "__code__")]
    raise LookupError(name)



def call(fn, apply=None, undo=None):
    """fn on fresh inputs under the change (APPLY unless given); the model's values as they started.
    Its outputs, then its inputs after the call (a write in place is a result too)."""
    global inputs, kwargs
    model.load_state_dict(START)
    torch.set_rng_state(RNG)
    inputs, kwargs = make_inputs(), {}
    exec(APPLY if apply is None else apply, globals())
    try:
        outs = [o for o in tree_leaves(fn(*inputs, **kwargs)) if isinstance(o, torch.Tensor)]
        return outs + [t.detach() for t in inputs if isinstance(t, torch.Tensor)]
    finally:
        exec(UNDO if undo is None else undo, globals())


def main():
    global model, RNG, START
    torch.manual_seed(SEED)
    model = Program()
    RNG = torch.get_rng_state()
    START = {k: v.detach().clone() for k, v in model.state_dict().items()}
    configure(DEDUP)
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend())
    compiled = torch.compile(model, backend=counter, **COMPILE_KWARGS)
    torch.set_rng_state(RNG)
    try:
        compiled(*make_inputs())  # the first call compiles
    except Exception as e:  # the failure comes before the change now
        if EXPECT_CRASH is None:
            raise
        return crashed(e, "the first call")
    for apply, undo in BEFORE:  # earlier changes that recompiled, in order, each as the harness made it
        try:
            call(compiled, apply, undo)
        except Exception as e:
            if EXPECT_CRASH is None:
                raise
            return crashed(e, "an earlier change's call")
    print(f"change: {CHANGE}")
    if EXPECT == "recompile":
        before = counter.frame_count
        call(compiled)
        if counter.frame_count > before:
            print(f"REPRODUCED: the change recompiled {counter.frame_count - before} frame(s) (torch {torch.__version__})")
            return 1
        print(f"not reproduced: no recompile after the change (torch {torch.__version__})")
        return 0
    expected = call(model)
    try:
        actual = call(compiled)
    except Exception as e:
        return crashed(e, "the call after the change")
    bad = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        if (e.dtype, e.shape, e.requires_grad) != (a.dtype, a.shape, a.requires_grad):
            bad.append(f"output[{i}]: expected {e.dtype}{tuple(e.shape)} requires_grad={e.requires_grad}, "
                       f"got {a.dtype}{tuple(a.shape)} requires_grad={a.requires_grad}")
        elif not torch.allclose(e.double(), a.double(), atol=tol(e.dtype), rtol=tol(e.dtype), equal_nan=True) or (
                SIGNED_ZEROS and e.is_floating_point() and ((e == 0) & (a == 0) & (e.signbit() != a.signbit())).any()):
            bad.append(f"value[{i}]: expected {e.flatten()[:4].tolist()}, got {a.flatten()[:4].tolist()}")
    if len(expected) != len(actual):
        bad.append(f"expected {len(expected)} outputs, got {len(actual)}")
    for line in bad:
        print(line)
    if bad:
        return wrong_values("after the change the compiled function disagrees with eager")
    print(f"not reproduced: compiled matches eager after the change (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
