"""Minimal torch-only repro: inductor + graph deduplication computes a wrong gradient.

block(h, w) = h + h * w is called twice (deduplicated into one invoke_subgraph);
then y = sin(h) feeds a matmul. Forward is right, grad[w2] is wrong: the second
block's saved input (the first block's output) is overwritten in the forward when
inductor reuses that buffer for y. Exit 1: reproduced; 0: not.
NCR=1: mark block with torch.compiler.nested_compile_region (dedup off) instead."""
import os, sys
import torch

NCR = os.environ.get("NCR") == "1"
torch.manual_seed(0)
x = torch.randn(4, 8, requires_grad=True)
w1 = torch.randn(8, requires_grad=True)
w2 = torch.randn(8, requires_grad=True)
params = {"x": x, "w1": w1, "w2": w2}


def block(h, w):
    return h + h * w


if NCR:
    block = torch.compiler.nested_compile_region(block)


def f(x):
    h = block(block(x, w1), w2)
    y = h.sin()
    return (y @ y.t()).sum()


def run(fn):
    for p in params.values():
        p.grad = None
    loss = fn(x)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in params.items()}


loss0, g0 = run(f)
x_before = x.detach().clone()
torch._dynamo.config.use_graph_deduplication = not NCR
loss1, g1 = run(torch.compile(f, backend="inductor"))
bad = [f"grad[{n}] off by {(g1[n] - g0[n]).abs().max().item():.4g} (max |eager| {g0[n].abs().max().item():.4g})"
       for n in g0 if not torch.allclose(g1[n], g0[n], rtol=1e-4, atol=1e-4)]
if not torch.allclose(loss0, loss1, rtol=1e-5):
    bad.insert(0, f"loss eager {loss0.item():.6g} compiled {loss1.item():.6g}")
if not torch.equal(x.detach(), x_before):
    bad.append("input x was modified")
mode = "nested_compile_region" if NCR else "use_graph_deduplication"
if bad:
    print(f"REPRODUCED ({torch.__version__}, {mode}): forward loss matches ({loss1.item():.6g}); " + "; ".join(bad))
    sys.exit(1)
print(f"not reproduced ({torch.__version__}, {mode}): loss and gradients match eager")
sys.exit(0)
