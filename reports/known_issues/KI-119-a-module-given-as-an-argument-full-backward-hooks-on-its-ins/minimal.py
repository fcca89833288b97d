"""KI-119: under no_grad, a value of w kept across a graph break gives w a zero gradient where eager leaves None (exits 1 while the bug lives)"""
import torch
import torch.nn.functional as F

w = torch.nn.Parameter(torch.tensor(0.5))


def f(x):
    with torch.enable_grad():
        aux = F.layer_norm(x, (2,))
        h = x + torch.sigmoid(x) * w  # live across the graph break: an output of the first graph
    torch._dynamo.graph_break()  # the program's FloatSub(2.0) call did this
    return h * 0.5, aux


def grad_of_w(fn, x):
    w.grad = None
    with torch.no_grad():  # the whole call under no_grad: only aux requires grad
        h, aux = fn(x)
    aux.sum().backward()  # aux does not depend on w
    return w.grad


torch.manual_seed(0)
x = torch.randn(2, requires_grad=True)
compiled_f = torch.compile(f, backend="aot_eager")
compiled_f(x)  # the first call, under grad mode
eager, compiled = grad_of_w(f, x), grad_of_w(compiled_f, x)  # the second recompiles for no_grad
print("w.grad, eager:", eager, "compiled:", compiled)
assert (compiled is None) == (eager is None), f"w.grad: eager {eager}, compiled {compiled}"
print("not reproduced: the compiled call leaves w.grad None")
