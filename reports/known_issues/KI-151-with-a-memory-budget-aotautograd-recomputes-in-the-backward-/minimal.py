"""KI-151: with a memory budget, AOTAutograd recomputes in the backward, under the caller's bfloat16 autocast, a forward traced with autocast disabled: dtype mismatch (raises while the bug lives)"""
import torch
import torch._functorch.config

torch._functorch.config.activation_memory_budget = 0.5  # 1.0 (the default): the activation is saved, it runs
w1, w2 = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)

def block(x, w):
    torch._dynamo.graph_break()  # block's rest is a frame of its own, traced with autocast disabled
    return x + torch.softmax(x @ w, dim=-1)

def fn(x):
    x = x + torch.softmax(x @ w1, dim=-1)
    with torch.autocast("cpu", enabled=False):
        return block(x, w2)

with torch.autocast("cpu", dtype=torch.bfloat16):  # eager and backend="eager" run
    torch.compile(fn, backend="aot_eager")(torch.randn(3)).sum().backward()
print("not reproduced: the backward ran")
