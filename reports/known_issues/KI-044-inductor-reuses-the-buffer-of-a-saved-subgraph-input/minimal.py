"""KI-044: inductor: a nested_compile_region called twice (x * w on x, then on x + 1) gets a wrong gradient for w (buffer reuse of what its subgraph saves; right with inplace_buffers and allow_buffer_reuse both off)"""
import sys, torch

@torch.compiler.nested_compile_region
def block(x, w):
    return x * w

def f(x, w):
    return block(x, w) + block(x + 1, w)

x = torch.tensor([1.0, 2.0])
w0 = torch.tensor([3.0, 4.0])
def grad(fn):
    w = w0.clone().requires_grad_()
    fn(x, w).sum().backward()
    return w.grad

exp = grad(f)  # d/dw = x + (x + 1) = [3, 5]
act = grad(torch.compile(f, backend=sys.argv[1] if len(sys.argv) > 1 else "inductor"))
print("eager:", exp.tolist(), "compiled:", act.tolist(), torch.__version__)
try:
    torch.testing.assert_close(act, exp)
except AssertionError:
    print("WRONG GRAD"); sys.exit(1)
print("ok")
