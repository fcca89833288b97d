"""KI-152: AOTAutograd's backward adds a None tangent: an output computed again under no_grad beside the same op's output that needs grad (raises while the bug lives)"""
import torch
import torch.nn.functional as F
w0, w1 = torch.ones(2, requires_grad=True), torch.zeros(2, requires_grad=True)
def blk(x):
    v0 = F.layer_norm(x, (2,))
    v2 = x + v0
    return F.layer_norm(v2, (2,), w0, w1).copy_(v2), v0
def f(x):
    out, a0 = blk(x)
    h = x + out
    o1, a1 = blk(h)
    with torch.no_grad():
        o2, a2 = blk(h)  # layer_norm(h) again, not requiring grad
    return h, o1, a1, a2
outs = [o for o in torch.compile(f, backend="aot_eager")(torch.randn(1, 1, 2)) if o.requires_grad]
torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])  # eager and backend="eager" run
print("not reproduced: the backward ran")
