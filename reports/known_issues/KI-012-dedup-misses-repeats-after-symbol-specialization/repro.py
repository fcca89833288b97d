"""Repro: KI-012: Missed optimization: with dynamic shapes, identical calls traced before and after a symbol is specialized are never deduplicated

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
    v0 = x + torch.ones((3,), device=x.device)
    return v0


class Program(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x, t0):
        h = x
        outs = []
        outs.append(block(x))
        outs.append(block(t0))
        outs.append(block(x))
        return (h, *outs)


def make_inputs(device="cpu"):
    x = torch.randn((3,), dtype=torch.bfloat16, device=device).requires_grad_(False)
    t0 = torch.randn((1,), dtype=torch.bfloat16, device=device).expand((3,)).requires_grad_(False)
    return [x, t0]


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


# ---- driver: exits 1 when ops of the block stay outside subgraph calls ----
import inspect
import re
import sys
import traceback

SEED = 0
COMPILE_KWARGS = {'fullgraph': False, 'dynamic': True}


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
            lines = re.findall(r"line (\d+)", node.meta.get("stack_trace") or "")
            if node.op.startswith("call") and lines and int(lines[-1]) in inside:
                left.append(node.name)
    calls = sum(n.target is torch.ops.higher_order.invoke_subgraph for gm in graphs for n in gm.graph.nodes)
    if left:
        print(f"REPRODUCED: {len(left)} op(s) of the block left outside subgraph calls: {left} "
              f"({calls} invoke_subgraph calls; torch {torch.__version__})")
        return 1
    print(f"not reproduced: every op of the block is inside a subgraph call (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # the failure did not show; something else went wrong
        traceback.print_exc()
        print("ERROR: the repro itself failed (exit 2), not the failure it checks for")
        status = 2
    sys.exit(status)
