"""KI-147: under torch.no_grad(), a compiled function that enables grad inside and graph-breaks after taking a
view of its input hands on a view with no grad_fn: AOTAutograd rebuilds input-aliasing outputs in the caller's
no_grad before restoring the graph's enable_grad, so x.grad is None where eager gives [0, 1, 1]; backend='eager'
and deduplication off agree with eager (raises while the bug lives)"""
import torch

torch._dynamo.config.use_graph_deduplication = True


def f(x):
    with torch.enable_grad():
        y = x[1:]  # a view of the input, made under enable_grad
        n = x.nonzero().sum()  # a data-dependent op: the graph breaks here
        return y + n * 0.0


def grad(fn):
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        out = fn(x)
    out.sum().backward()  # out requires grad in both (enable_grad inside)
    return x.grad


expected, got = grad(f), grad(torch.compile(f, backend="aot_eager"))
print("eager x.grad:", expected, "| compiled x.grad:", got)
assert got is not None and torch.equal(expected, got), "the input's gradient was lost through the view"
print("not reproduced: the compiled gradient matches eager")
