"""KI-157: two log_softmax(x, dim=-2/-1) + rms_norm(x) blocks, v2 + v0.float().mean().type_as(v2), deduplicated (invoke_subgraph), dynamic rank-3 float64 x: wrong x.grad on aot_eager."""
import sys, torch, torch.nn.functional as F, torch._dynamo, torch._functorch.config
torch._dynamo.config.use_graph_deduplication = sys.argv[1:2] != ["0"]
if "nocse" in sys.argv: torch._functorch.config.cse = False

def block(x, d):
    v0 = torch.log_softmax(x, dim=d)
    v2 = F.rms_norm(x, (3,))
    return v2 + v0.float().mean().type_as(v2)

def f(x):
    return [block(x, -2), block(x, -1)]

def grad(fn, x):
    x = x.detach().clone().requires_grad_(True)
    torch.autograd.backward(fn(x), [torch.ones(2, 5, 3, dtype=torch.float64)] * 2)
    return x.grad

torch.manual_seed(0)
cf = torch.compile(f, backend="aot_eager")
cf(torch.randn(5, 3, dtype=torch.float64))  # first compile (static) is right
x = torch.randn(2, 5, 3, dtype=torch.float64)  # rank change: recompile with dynamic sizes
d = (grad(cf, x) - grad(f, x)).abs().max().item()
print("max |compiled - eager| of x.grad:", d)
sys.exit(int(d > 1e-6))
