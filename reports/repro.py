"""Standalone repro scripts: torch and the standard library only.

A repro embeds the program's source, runs it in eager, in float64 and through
``torch.compile`` with graph deduplication, compares like the differential
oracle, prints expected versus actual, and exits 1 when the failure reproduces
and 0 when it does not, so it can bisect torch versions.
"""

from __future__ import annotations

import inspect
from dataclasses import replace

from generators.check import zero_signs_determined
from generators.codegen import render, render_inputs
from generators.ir import Program
from generators.regions import with_regions
from generators.replays import ReplayPlan, resized
from generators.variants import PRELUDE
from harness.backends import resolve
from harness.execute import first_line
from harness.outcome import RunConfig
from harness.pipeline import torch_compile_kwargs
from harness.replay import call_seed

from .signature import normalize


def _low_precision(program: Program) -> bool:
    """bfloat16 anywhere (inputs, casts, autocast) needs a looser first check."""
    return "bfloat16" in program.to_json() or any(c.context.autocast for _, c in program.repeats())


RUN = '''

# ---- driver: exits 1 when the failure reproduces, 0 when it does not ----
import sys
import traceback

from torch.utils._pytree import tree_leaves

DEDUP = {dedup!r}
SEED = {seed!r}
COMPILE_KWARGS = {compile_kwargs!r}
ATOL = RTOL = {tol!r}


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
    values = {{f"output[{{i}}]": o.detach() for i, o in enumerate(outs)}}
    values.update({{f"output[{{i}}].requires_grad": torch.tensor(o.requires_grad) for i, o in enumerate(outs)}})
    values.update({{f"input {{i}} after the run": t.detach() for i, t in enumerate(inputs)}})
    values.update({{f"buffer {{n}} after the run": b for n, b in model.named_buffers()}})
    values.update({{f"grad[input {{i}}]": t.grad for i, t in enumerate(inputs) if t.requires_grad}})
    values.update({{f"grad[{{n}}]": p.grad for n, p in model.named_parameters()}})
    return values


'''

BAD = '''SIGNED_ZEROS = {signed_zeros!r}  # the program decides the sign of its zeros (no summing op)


def bad(name, exp, act, ref):
    """What is wrong with ``act`` as a compiled ``exp`` (None: nothing). NaN,
    infinities and signed zeros that eager and its float64 run agree on must
    match exactly; where the two disagree it is float noise, left out."""
    if (exp is None) != (act is None):
        return f"expected {{'None' if exp is None else 'a tensor'}}, got {{'None' if act is None else 'a tensor'}}"
    if exp is None:
        return None
    if exp.dtype != act.dtype or exp.shape != act.shape:
        return f"expected {{exp.dtype}}{{tuple(exp.shape)}}, got {{act.dtype}}{{tuple(act.shape)}}"
    if not (exp.is_floating_point() or exp.is_complex()):
        return None if torch.equal(exp, act) else "exact values differ"
    if exp.is_complex():
        exp, act = torch.view_as_real(exp.resolve_conj()), torch.view_as_real(act.resolve_conj())
        ref = torch.view_as_real(ref.resolve_conj()) if ref is not None and ref.is_complex() else None
    e, a = exp.flatten().double(), act.flatten().double()
    r = ref.flatten().double() if ref is not None and ref.shape == exp.shape and ref.is_floating_point() else None

    def at(mask, what):
        i = int(mask.nonzero()[0])
        f64 = f" (float64 {{r[i].item():.6g}})" if r is not None else ""
        return f"{{what}}: expected {{e[i].item():.6g}}, got {{a[i].item():.6g}}{{f64}} at flat index {{i}}"

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
    if torch.allclose(e, a, atol=ATOL, rtol=RTOL):
        return None
    if ref is not None and (a - r).abs().max().item() <= 3 * (e - r).abs().max().item() + ATOL:
        return None
    i = int((a - e).abs().argmax())
    return f"expected {{e[i].item():.6g}}, got {{a[i].item():.6g}} (float64 {{r[i].item():.6g}})"

'''

# Strict crash checks (differential and guard drivers): a repro exits 1 only
# for the failure its finding is, 3 when the program fails another way.
STRICT = '''
import fnmatch
import re

# The failure this repro checks for: a crash (a glob over its normalized
# "Type: message"), "" for wrong values (a crash then fails differently:
# exit 3), None for any failure.
EXPECT_CRASH = {expect_crash!r}

{normalizer}

{first_line}


def crashed(e, what):
    """The exit status for crash ``e`` of ``what``: 1 when it is the expected one."""
    traceback.print_exc()
    got = normalize(f"{{type(e).__qualname__}}: {{first_line(e)}}")
    if EXPECT_CRASH is not None and not (EXPECT_CRASH and fnmatch.fnmatchcase(got, EXPECT_CRASH)):
        print(f"FAILS DIFFERENTLY (exit 3): expected {{EXPECT_CRASH or 'wrong values'}}, got {{got}}")
        return 3
    print(f"REPRODUCED: {{what}} raised {{got}} (torch {{torch.__version__}})")
    return 1


def wrong_values(what):
    """The exit status for wrong values (``what`` went wrong): 1, or 3 where a
    crash was expected (the crash is gone, the values are wrong: another failure)."""
    if EXPECT_CRASH:
        print(f"FAILS DIFFERENTLY (exit 3): expected {{EXPECT_CRASH}}, but the compiled program ran with wrong values")
        return 3
    print(f"REPRODUCED: {{what}} (torch {{torch.__version__}})")
    return 1
'''

COMPARE = BAD + STRICT + '''
def main():
    expected = run(compiled=False)
    try:
        reference = run(compiled=False, float64=True)
    except Exception:
        reference = {{}}
    try:
        actual = run(compiled=True)
    except Exception as e:
        return crashed(e, f"torch.compile(backend={{BACKEND!r}}, deduplication {{DEDUP}})")
    failures = [(k, bad(k, expected[k], actual.get(k), reference.get(k))) for k in expected]
    failures = [(k, m) for k, m in failures if m]
    for k, m in failures:
        print(f"{{k}}: {{m}}")
    if failures:
        return wrong_values(f"{{len(failures)}} value(s) differ from eager")
    print(f"not reproduced: compiled matches eager (torch {{torch.__version__}})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
'''

DRIVER = RUN + COMPARE



# How every driver compiles: the backend (a plugin is imported, so the repro
# needs the plugin but nothing of this project) and the run's torch config.
SETUP = '''

# ---- how this repro compiles: the backend and the torch config of the run ----
import importlib
import os
import sys

import torch._dynamo

BACKEND = {backend!r}  # a torch backend name, or package.module:callable
TORCH_CONFIG = {torch_config!r}


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
'''


# For missed optimizations: the finding is that some call of the block kept
# its ops in the graph instead of becoming a subgraph call.
DEDUP_DRIVER = '''

# ---- driver: exits 1 when ops of the block stay outside subgraph calls ----
import inspect
import re
import sys
import traceback

SEED = {seed!r}
COMPILE_KWARGS = {compile_kwargs!r}


def block_lines():
    fn = globals().get("block") or globals().get("Block") or BLOCKS[0]  # BLOCKS: instances of one factory
    fn = inspect.unwrap(getattr(fn, "forward", fn))
    lines, first = inspect.getsourcelines(fn)
    return range(first, first + len(lines))


def main():
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        return torch._dynamo.lookup_backend(backend())(gm, example_inputs)

    torch.manual_seed(SEED)
    configure(True)
    torch.compile(Program(), backend=recording, **COMPILE_KWARGS)(*make_inputs())
    inside = block_lines()
    left = []
    for gm in graphs:
        print(gm.code)
        for node in gm.graph.nodes:
            lines = re.findall(r"line (\\d+)", node.meta.get("stack_trace") or "")
            if node.op.startswith("call") and lines and int(lines[-1]) in inside:
                left.append(node.name)
    calls = sum(n.target is torch.ops.higher_order.invoke_subgraph for gm in graphs for n in gm.graph.nodes)
    if left:
        print(f"REPRODUCED: {{len(left)}} op(s) of the block left outside subgraph calls: {{left}} "
              f"({{calls}} invoke_subgraph calls; torch {{torch.__version__}})")
        return 1
    print(f"not reproduced: every op of the block is inside a subgraph call (torch {{torch.__version__}})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
'''

# For guard findings: one compiled function, called, then called again after
# one change (the very statements the harness ran), against eager on the change.
GUARD_DRIVER = STRICT + '''

# ---- driver: compile, call, make one change, call again; exits 1 when the
# second call crashes or disagrees with eager under the same change ----
import sys
import traceback

import torch._dynamo.testing
from torch.utils._pytree import tree_leaves

DEDUP = {dedup!r}
SEED = {seed!r}
COMPILE_KWARGS = {compile_kwargs!r}
ATOL = RTOL = {tol!r}
CHANGE = {description!r}
# "values": reproduced when the second call is wrong; "recompile": when it
# recompiles although the change cannot alter the result
EXPECT = {expect!r}
APPLY = """
{apply}
"""
UNDO = """
{undo}
"""
# (apply, undo) of changes made and called before CHANGE, in order: a bug
# that needs a history (a float made dynamic by an earlier change)
BEFORE = {before!r}


{prelude}


def call(fn):
    """fn on fresh inputs under the change; the model's values as they started."""
    global inputs, kwargs
    model.load_state_dict(START)
    torch.set_rng_state(RNG)
    inputs, kwargs = make_inputs(), {{}}
    exec(APPLY, globals())
    try:
        return [o for o in tree_leaves(fn(*inputs, **kwargs)) if isinstance(o, torch.Tensor)]
    finally:
        exec(UNDO, globals())


def main():
    global model, RNG, START
    torch.manual_seed(SEED)
    model = Program()
    RNG = torch.get_rng_state()
    START = {{k: v.detach().clone() for k, v in model.state_dict().items()}}
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
    for apply, undo in BEFORE:  # earlier changes the compiled function met, in order
        exec(apply, globals())
        compiled(*make_inputs())
        exec(undo, globals())
    print(f"change: {{CHANGE}}")
    if EXPECT == "recompile":
        before = counter.frame_count
        call(compiled)
        if counter.frame_count > before:
            print(f"REPRODUCED: the change recompiled {{counter.frame_count - before}} frame(s) (torch {{torch.__version__}})")
            return 1
        print(f"not reproduced: no recompile after the change (torch {{torch.__version__}})")
        return 0
    expected = call(model)
    try:
        actual = call(compiled)
    except Exception as e:
        return crashed(e, "the call after the change")
    bad = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        if (e.dtype, e.shape, e.requires_grad) != (a.dtype, a.shape, a.requires_grad):
            bad.append(f"output[{{i}}]: expected {{e.dtype}}{{tuple(e.shape)}} requires_grad={{e.requires_grad}}, "
                       f"got {{a.dtype}}{{tuple(a.shape)}} requires_grad={{a.requires_grad}}")
        elif not torch.allclose(e.double(), a.double(), atol=ATOL, rtol=RTOL, equal_nan=True):
            bad.append(f"output[{{i}}]: expected {{e.flatten()[:4].tolist()}}, got {{a.flatten()[:4].tolist()}}")
    if len(expected) != len(actual):
        bad.append(f"expected {{len(expected)}} outputs, got {{len(actual)}}")
    for line in bad:
        print(line)
    if bad:
        return wrong_values("after the change the compiled function disagrees with eager")
    print(f"not reproduced: compiled matches eager after the change (torch {{torch.__version__}})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
'''

# For a worker lost to the compiler (signal, hang, runaway memory): the
# compiled run happens in a child process, watched from outside.
PROCESS = '''

# ---- driver: exits 1 when the compiled run dies by a signal, hangs or runs
# away with memory in a child process ----
import os
import resource
import subprocess

LOST = {lost!r}  # what the campaign saw: "signal", "hang", "memory" or "exit"
TIMEOUT_S = {timeout!r}
MEMORY_MB = {memory_mb!r}


def main():
    if os.environ.get("REPRO_CHILD"):
        global DEDUP
        try:
            run(compiled=True)
        except Exception:
            if not DEDUP:
                raise
            # the worker went on to its run without the pass (the dedup-off
            # companion), where the program may take the process down: so does this child
            traceback.print_exc()
            DEDUP = False
            run(compiled=True)
        return 0
    try:
        done = subprocess.run([sys.executable, __file__], env={{**os.environ, "REPRO_CHILD": "1"}}, timeout=TIMEOUT_S,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        print(f"expected: the compiled run finishes; actual: still running after {{TIMEOUT_S}} s")
        if LOST == "hang":
            print(f"REPRODUCED: the compiled run hangs (torch {{torch.__version__}})")
            return 1
        print(f"ERROR: timed out, which is not the failure this repro checks for ({{LOST}})")
        return 2
    print(done.stderr[-3000:])
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"expected: the compiled run exits normally; actual: exit status {{done.returncode}}, peak memory {{peak_mb:.0f}} MB")
    if done.returncode == 2:
        print("ERROR: the compiled run failed before it could show the failure (exit 2)")
        return 2
    if LOST in ("signal", "exit") and done.returncode != 0:
        how = f"died by signal {{-done.returncode}}" if done.returncode < 0 else f"exited with status {{done.returncode}}"
        print(f"REPRODUCED: the compiled run {{how}} (torch {{torch.__version__}})")
        return 1
    if LOST == "memory" and peak_mb > MEMORY_MB:
        print(f"REPRODUCED: the compiled run used {{peak_mb:.0f}} MB (limit {{MEMORY_MB}} MB)")
        return 1
    print(f"not reproduced (torch {{torch.__version__}})")
    return 0
'''


# For findings about deduplication itself (the rewrite, dedup on vs off):
# the same backend with and without the pass must agree (bitwise where the
# backend runs the same kernels either way).
TOGGLE = '''

# ---- driver: dedup on vs off on the same backend; exits 1 when they disagree ----
BITWISE = {bitwise!r}


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
        print(f"REPRODUCED: torch.compile(backend={{BACKEND!r}}) raises with deduplication only")
        return 1
    differ = []
    for k, e in expected.items():
        a = actual.get(k)
        if (e is None) != (a is None):
            differ.append(f"{{k}}: without dedup {{'None' if e is None else 'a tensor'}}, with dedup {{'None' if a is None else 'a tensor'}}")
        elif e is not None and not same(e, a):
            if e.shape != a.shape or e.dtype != a.dtype or not e.is_floating_point():
                differ.append(f"{{k}}: without dedup {{e.dtype}}{{tuple(e.shape)}}, with dedup {{a.dtype}}{{tuple(a.shape)}}")
                continue
            i = int((a.double() - e.double()).abs().nan_to_num(float("inf")).flatten().argmax())
            differ.append(f"{{k}}: without dedup {{e.flatten()[i].item():.9g}}, with dedup {{a.flatten()[i].item():.9g}} "
                          f"at flat index {{i}}")
    for line in differ:
        print(line)
    if differ:
        print(f"REPRODUCED: {{len(differ)}} value(s) differ with deduplication on vs off (torch {{torch.__version__}})")
        return 1
    print(f"not reproduced: deduplication on and off agree (torch {{torch.__version__}})")
    return 0
'''

# For region identity: the tracker's own region groups, each region compared
# node by node with the first (op, constant arguments, the grad/autocast/
# inference/default-dtype state it was traced under).
REGIONS = '''

# ---- driver: exits 1 when the pass groups regions that are not identical ----
import sys
import traceback

from torch._dynamo import graph_deduplication, output_graph
from torch._dynamo.graph_region_tracker import GraphRegionTracker
from torch.utils._pytree import tree_leaves

SEED = {seed!r}
COMPILE_KWARGS = {compile_kwargs!r}
GROUPS = []
ENTRIES = {{}}  # id(OutputGraph) -> the state its frame started in
AFTER = []  # (root, graph, entry state) of each graph after the pass
ENTRY = None
REPLACED = {{}}  # subgraph call -> the traced states of the region it replaced


def state():
    autocast = torch.is_autocast_enabled("cpu")
    return {{"grad": torch.is_grad_enabled(), "inference": torch.is_inference_mode_enabled(),
            "autocast": autocast, "autocast_dtype": str(torch.get_autocast_dtype("cpu")) if autocast else None,
            "default_dtype": str(torch.get_default_dtype())}}


def install():
    create_proxy, regions = output_graph.SubgraphTracer.create_proxy, GraphRegionTracker.get_identical_regions
    init, dedup = output_graph.OutputGraph.__init__, output_graph.apply_graph_deduplication
    replace = graph_deduplication._replace_region_with_subgraph

    def recording_create_proxy(self, *args, **kwargs):
        proxy = create_proxy(self, *args, **kwargs)
        proxy.node.meta["repro_state"] = state()
        return proxy

    def recording_regions(self, graph):
        groups = regions(self, graph)
        GROUPS.extend(groups)
        return groups

    def recording_init(self, *args, **kwargs):
        ENTRIES[id(self)] = state()  # each frame's graph starts from the state at its entry
        init(self, *args, **kwargs)

    def recording_dedup(og):
        entry = ENTRIES.get(id(og), ENTRY)
        root = output_graph.FakeRootModule(og.nn_modules)
        # judged only where replaying the state nodes models the graph before the pass
        modelled = not misplaced(root, og.graph, entry)
        result = dedup(og)
        if modelled:  # the graph as the pass left it, judged even when a later step fails
            AFTER.append((output_graph.FakeRootModule(og.nn_modules), og.graph, entry))
        return result

    def recording_replace(graph, region, *args, **kwargs):
        calls = graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph)
        result = replace(graph, region, *args, **kwargs)
        for node in graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph):
            if node not in calls:
                REPLACED[node] = [n.meta.get("repro_state") for n in region]
        return result

    output_graph.SubgraphTracer.create_proxy = recording_create_proxy
    GraphRegionTracker.get_identical_regions = recording_regions
    output_graph.OutputGraph.__init__ = recording_init
    output_graph.apply_graph_deduplication = recording_dedup
    graph_deduplication._replace_region_with_subgraph = recording_replace


def constants(node):
    return [(type(v).__name__, repr(v)) for v in tree_leaves((node.args, node.kwargs)) if not isinstance(v, torch.fx.Node)]


def difference(a, b):
    if (a.op, a.target) != (b.op, b.target):
        return f"op {{a.target}} vs {{b.target}}"
    if constants(a) != constants(b):
        return f"constant arguments {{constants(a)}} vs {{constants(b)}}"
    sa, sb = a.meta.get("repro_state"), b.meta.get("repro_state")
    if sa and sb and sa != sb:
        return f"traced under {{sa}} vs {{sb}}"
    return None


def misplaced(root, graph, entry):
    """Ops and subgraph calls that run under another grad/autocast state than
    they (their body's ops) were traced under: the state replayed along the
    graph's own set_grad_enabled and autocast nodes, from its frame's entry."""
    grad, autocast, stack, found = entry["grad"], (entry["autocast"], entry["autocast_dtype"]), [], []
    for node in graph.nodes:
        if node.target is torch._C._set_grad_enabled:
            grad = bool(node.args[0])
            continue
        if node.target is torch.amp._enter_autocast:
            stack.append((grad, autocast))
            autocast = (bool(node.args[2]), str(node.args[1]) if node.args[2] else None)
            continue
        if node.target is torch.autograd.grad_mode._enter_inference_mode:
            stack.append((grad, autocast))
            grad = grad and not (node.args and node.args[0])
            continue
        if node.target in (torch.amp._exit_autocast, torch.autograd.grad_mode._exit_inference_mode):
            grad, autocast = stack.pop() if stack else (grad, autocast)
            continue
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        if node.target is torch.ops.higher_order.invoke_subgraph:
            # the region this call replaced, else (a nested_compile_region) its body
            states = REPLACED.get(node) or [n.meta.get("repro_state") for n in getattr(root, node.args[0].target).graph.nodes]
        else:
            states = [node.meta.get("repro_state")]
        traced = {{(s["grad"], (s["autocast"], s["autocast_dtype"])) for s in states if s}}
        if traced and traced != {{(grad, autocast)}}:
            found.append(f"{{node.name}} runs under grad={{grad}}, autocast={{autocast}}; its ops were "
                         f"traced under (grad, autocast) {{sorted(traced, key=str)}}")
    return found


def main():
    global ENTRY
    install()
    torch.manual_seed(SEED)
    configure(True)
    ENTRY = state()
    broken, compiler = [], torch._dynamo.lookup_backend(backend())  # resolved (a plugin entered) before compiling

    def lint(graph):
        try:
            graph.lint()
        except Exception as e:
            broken.append(f"graph.lint(): {{str(e).splitlines()[0]}}")

    def linted(gm, example_inputs):  # what the backend receives must be a valid graph
        lint(gm.graph)
        return compiler(gm, example_inputs)

    try:
        torch.compile(Program(), backend=linted, **COMPILE_KWARGS)(*make_inputs())
    except Exception:
        traceback.print_exc()  # the groups and graphs were recorded before the failure
    for root, graph, entry in AFTER:  # as the pass left it: a later step may have failed on it
        lint(graph)
    found = list(dict.fromkeys(broken)) + [line for root, graph, entry in AFTER for line in misplaced(root, graph, entry)]
    for g, group in enumerate(GROUPS):
        for r, region in enumerate(group[1:], 1):
            for a, b in zip(group[0], region):
                d = difference(a, b)
                if d:
                    found.append(f"group {{g}}: node {{b.name}} of region {{r}} vs {{a.name}} of region 0: {{d}}")
                    break
    for line in found:
        print(line)
    print(f"expected: every region of a group identical; actual: {{len(found)}} region(s) differ "
          f"({{len(GROUPS)}} group(s))")
    if found:
        print(f"REPRODUCED: the pass leaves an invalid graph or deduplicates regions that differ "
              f"(torch {{torch.__version__}})")
        return 1
    print(f"not reproduced: every region of every group alike (torch {{torch.__version__}})")
    return 0
'''

# For CUDA-graph findings: the calls of a replay plan (warm-up, record,
# replays, a resized call), each against eager, with results held across the
# next call (harness.replay, oracles.cudagraph).
REPLAY = '''

# ---- driver: CUDA-graph replays; exits 1 when a call is wrong or a result goes stale ----
import sys
import traceback

from torch.utils._pytree import tree_leaves

DEDUP = {dedup!r}
SEED = {seed!r}
COMPILE_KWARGS = {compile_kwargs!r}
ATOL = RTOL = {tol!r}
DEVICE = {device!r}
PLAN = {plan!r}
PHASES = {phases!r}
CALL_SEEDS = {call_seeds!r}
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
    \"\"\"Values of one call (copies) and the live tensors they were copied from.\"\"\"
    for p in m.parameters():
        p.grad = None
    outs = [o for o in tree_leaves(fn(*inputs)) if isinstance(o, torch.Tensor)]
    values = {{f"output[{{i}}]": o.detach().clone() for i, o in enumerate(outs)}}
    live = [(f"output[{{i}}]", o) for i, o in enumerate(outs)]
    diff = [(i, o) for i, o in enumerate(outs) if o.requires_grad]
    if PLAN["backward"] and diff:
        cots = []
        for i, o in diff:
            g = torch.Generator().manual_seed(1000 + i)
            cots.append(torch.randn(o.shape, generator=g, device="cpu").to(o.device, o.dtype))
        torch.autograd.backward([o for _, o in diff], cots)
    values.update({{f"input {{i}} after the call": t.detach().clone() for i, t in enumerate(inputs)}})
    values.update({{f"buffer {{n}} after the call": b.detach().clone() for n, b in m.named_buffers()}})
    grads = [(f"grad[input {{i}}]", t.grad) for i, t in enumerate(inputs)] + \\
        [(f"grad[{{n}}]", p.grad) for n, p in m.named_parameters()]
    values.update({{k: None if g is None else g.detach().clone() for k, g in grads}})
    live += [(k, g) for k, g in grads if g is not None]
    return values, live


def main():
    problems = []
    configure(DEDUP)
    torch._dynamo.reset()
    eager_model, ref_model, graphed_model = model(), model(float64=True), model()
    graphed = torch.compile(graphed_model, backend=backend(), **COMPILE_KWARGS)
    static, pending = {{}}, []
    for k, phase in enumerate(PHASES):
        expected = call(eager_model, eager_model, inputs_for(k))[0]
        try:
            reference = call(ref_model, ref_model, inputs_for(k, float64=True))[0]
        except Exception:
            reference = {{}}
        xs = graphed_inputs(k, static)
        if PLAN["mark_step"]:
            torch.compiler.cudagraph_mark_step_begin()
        try:
            actual, live = call(graphed, graphed_model, xs)
        except Exception:
            traceback.print_exc()
            problems.append(f"call {{k}} ({{phase}}): the compiled call raised")
            break
        for name, exp in expected.items():
            m = bad(name, exp, actual.get(name), reference.get(name))
            if m:
                problems.append(f"call {{k}} ({{phase}}) {{name}}: {{m}}")
        if PLAN["twice"]:  # a second call in the same step, other values: the first's results stay live
            expected = call(eager_model, eager_model, inputs_for(k, second=True))[0]
            try:
                reference = call(ref_model, ref_model, inputs_for(k, float64=True, second=True))[0]
            except Exception:
                reference = {{}}
            try:
                again = call(graphed, graphed_model, graphed_inputs(k, static, second=True))[0]
            except Exception:
                traceback.print_exc()
                problems.append(f"call {{k}} ({{phase}}): the second call of the step raised")
                break
            for name, exp in expected.items():
                m = bad(name, exp, again.get(name), reference.get(name))
                if m:
                    problems.append(f"call {{k}} ({{phase}}), second call of the step, {{name}}: {{m}}")
            for name, t in live:
                try:
                    now = t.detach().clone()
                except RuntimeError as e:
                    problems.append(f"{{name}} of call {{k}}: unreadable after a second call in the same step: {{e}}")
                    continue
                if not same(now, actual[name]):
                    problems.append(f"{{name}} of call {{k}} changed after a second call in the same step")
        for j, name, t, before in pending:
            try:
                now = t.detach().clone()
            except RuntimeError as e:
                if OVERWRITTEN not in str(e):
                    problems.append(f"{{name}} of call {{j}}: reading it after call {{k}} raised {{e}}")
                continue
            if not same(now, before):
                change = (now.double() - before.double()).abs().max().item()
                problems.append(f"{{name}} of call {{j}} changed by {{change:.3g}} when call {{k}} ran, "
                                f"and reading it raised no error")
        pending = [(k, name, t, actual[name]) for name, t in live]
    for p in problems:
        print(p)
    if problems:
        print(f"REPRODUCED: {{len(problems)}} problem(s) over {{len(PHASES)}} calls on {{DEVICE}} (torch {{torch.__version__}})")
        return 1
    print(f"not reproduced: every call matches eager and no result went stale (torch {{torch.__version__}})")
    return 0
'''


# For nested_compile_region findings: the program as drawn against its twin,
# the same program with the decorator removed or moved (its own source,
# imported from a file of its own: Dynamo keys code on file and line), both
# compiled on the same backend; the float64 eager run of the program referees
# numerical noise.
REGION_TOGGLE = '''

# ---- driver: the program as drawn vs its twin (nested_compile_region {twin_label}),
# compiled alike; exits 1 when they disagree or only one of them raises ----
import importlib.util
import os
import tempfile

TWIN = {twin_label!r}
TWIN_SOURCE = {twin_source}


def load_twin():
    path = os.path.join(tempfile.mkdtemp(), "twin_program.py")
    with open(path, "w") as f:
        f.write(TWIN_SOURCE)
    spec = importlib.util.spec_from_file_location("twin_program", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["twin_program"] = module
    spec.loader.exec_module(module)
    return module


def compiled_run(program, inputs):
    """run(compiled=True) of ``program``: its values, or the exception it raised."""
    global Program, make_inputs
    saved = Program, make_inputs
    Program, make_inputs = program, inputs
    try:
        return run(compiled=True), None
    except Exception as e:
        traceback.print_exc()
        return None, e
    finally:
        Program, make_inputs = saved


def main():
    twin = load_twin()
    try:
        reference = run(compiled=False, float64=True)
    except Exception:
        reference = {{}}
    expected, twin_error = compiled_run(twin.Program, twin.make_inputs)
    actual, error = compiled_run(Program, make_inputs)
    where = f"torch.compile(backend={{BACKEND!r}}, deduplication {{DEDUP}}), torch {{torch.__version__}}"
    if twin_error is not None and error is not None:
        print("ERROR: the program and its twin both raise: not the failure this repro checks for")
        return 2
    if (twin_error is None) != (error is None):
        side = "the twin (" + TWIN + ")" if twin_error is not None else "the program as drawn"
        print(f"REPRODUCED: only {{side}} raises ({{where}})")
        return 1
    failures = [(k, bad(k, expected[k], actual.get(k), reference.get(k))) for k in expected]
    failures = [(k, m) for k, m in failures if m]
    for k, m in failures:
        print(f"{{k}}: {{m}} (expected: the twin; got: the program as drawn)")
    if failures:
        print(f"REPRODUCED: {{len(failures)}} value(s) differ between the program and its twin ({{TWIN}}; {{where}})")
        return 1
    print(f"not reproduced: the program and its twin ({{TWIN}}) agree ({{where}})")
    return 0
'''


# Which driver checks a finding of each oracle (a crash is always re-raised by
# the differential driver; guard findings re-make their change).
ORACLE_DRIVERS = {"region_identity": "regions", "graph_validity": "regions", "rewrite": "toggle",
                  "dedup_toggle": "toggle"}


# What a repro checks, by the name an issue.json gives under "repro".
ENTRY = '''

if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
'''

DRIVERS = {"differential": DRIVER, "process": RUN + PROCESS + ENTRY, "toggle": RUN + TOGGLE + ENTRY,
           "regions": REGIONS + ENTRY, "deduplicated": DEDUP_DRIVER, "guard": GUARD_DRIVER, "recompile": GUARD_DRIVER,
           "replay": BAD + REPLAY + ENTRY, "region_toggle": RUN + BAD + REGION_TOGGLE + ENTRY}


def driver_for(details: dict, severity: str, oracle: str = "", kind: str = "") -> tuple[str, dict | None]:
    """The repro driver for a finding: guard findings re-make their change;
    nested_compile_region findings (crashes too) build their twin (the
    blocks it decorates, and whether it compiles with deduplication)."""
    if oracle == "compile_region":
        return "region_toggle", {k: details[k] for k in ("twin", "label", "regions", "dedup") if k in details}
    if "variant" in details:
        return ("recompile" if severity == "recompile" else "guard"), details["variant"]
    if severity == "missed":
        return "deduplicated", None
    return ("differential" if kind == "crash" else ORACLE_DRIVERS.get(oracle, "differential")), None


EXITS = "Exit status 1: reproduced; 0: not reproduced; 3: fails, but differently; 2: the repro itself failed."
# First in every repro: an error before its check (torch lacking what the
# program uses, at import) is the repro failing, exit 2, never Python's 1.
GUARDED = '''import os as _os
import sys as _sys
import traceback as _traceback


def _error_before_check(kind, value, tb):
    _traceback.print_exception(kind, value, tb)
    print("ERROR: the repro itself failed (exit 2), not the failure it checks for", flush=True)
    _sys.stderr.flush()
    _os._exit(2)


_sys.excepthook = _error_before_check
'''


def render_repro(program: Program, config: RunConfig, title: str, check: str = "differential",
                 variant: dict | None = None, lost: dict | None = None, replay: dict | None = None,
                 expect_crash: str | None = None) -> str:
    """``variant`` (a ``generators.variants.Variant`` as a dict) is the
    change the "guard" driver makes between its two calls; ``lost`` (kind,
    timeout, memory_mb) what the "process" driver watches for; ``replay``
    (plan, device) the calls the "replay" driver makes; for "region_toggle",
    ``variant`` names the twin (``regions``: the blocks it decorates;
    ``dedup``: whether both compile with deduplication). ``expect_crash``
    (differential and guard drivers): a glob over the normalized crash the finding is
    ("" for wrong values); the repro exits 3 when the program fails another way, so
    ``git bisect run`` stops at the right commit. None accepts any failure."""
    header = f'"""Repro: {title}\n\n{EXITS} Needs only torch."""\n' + GUARDED
    backend = resolve(config.backend)
    region = {}
    if check == "region_toggle":
        region, variant = _region_fields(program, {"dedup": config.dedup, **(variant or {})}), None
        config = replace(config, dedup=region.pop("dedup"))
    change = variant or {"description": "nothing", "apply": (), "undo": ()}
    driver = (SETUP + DRIVERS[check]).format(
        description=change["description"],
        apply="\n".join(change["apply"]),
        undo="\n".join(change["undo"]),
        before=[("\n".join(a), "\n".join(u)) for a, u in change.get("before", [])],
        prelude=PRELUDE,
        expect={"guard": "values", "recompile": "recompile"}.get(check, ""),
        # a child pays torch's import and the compile: give it the campaign's
        # confirmed-hang deadline, at least a minute
        lost=(lost or {}).get("kind", ""), timeout=max(60, 3 * (lost or {}).get("timeout", 120)),
        memory_mb=(lost or {}).get("memory_mb", 8192),
        bitwise=backend.bitwise,
        backend=backend.repro_spec,
        torch_config={**{f"inductor.{k}": v for k, v in backend.inductor_config.items()}, **dict(config.torch_config)},
        dedup=config.dedup,
        seed=program.seed,
        compile_kwargs={**torch_compile_kwargs(program, config), **backend.options},
        tol=1e-2 if _low_precision(program) else 1e-4,
        signed_zeros=zero_signs_determined(program),
        expect_crash=expect_crash,
        normalizer=inspect.getsource(normalize).strip(),
        first_line=inspect.getsource(first_line).strip(),
        **_replay_fields(program, replay),
        **region,
    )
    return header + render(program) + _resized_inputs(program, replay) + driver


def _region_fields(program: Program, twin: dict) -> dict:
    """The twin of a region_toggle repro: its label and source (by default
    the program with every decorator removed) and the dedup setting of both
    compiles."""
    regions = set(twin.get("regions", ()))
    source = render(with_regions(program, regions))
    literal = f'"""{source}"""' if '"""' not in source and "\\" not in source else repr(source)
    label = twin.get("label") or ("removed" if not regions else f"on {sorted(regions)}")
    return {"twin_label": label, "twin_source": literal, "dedup": twin["dedup"]}


def _replay_fields(program: Program, replay: dict | None) -> dict:
    if replay is None:
        return {}
    plan = ReplayPlan.from_dict(replay["plan"])
    return {"device": replay["device"], "phases": [plan.phase(k) for k in range(plan.calls)],
            "call_seeds": [call_seed(program, k) for k in range(plan.calls)],
            "plan": {**plan.to_dict(), "input_names": [n for n, _ in program.inputs]}}


def _resized_inputs(program: Program, replay: dict | None) -> str:
    """``make_resized_inputs()``: the inputs of the plan's resized call."""
    plan = ReplayPlan.from_dict(replay["plan"]) if replay else None
    if plan is None or plan.resize is None:
        return ""
    return "\n\n" + "\n".join(render_inputs(resized(program, plan.resize), "make_resized_inputs")) + "\n"
