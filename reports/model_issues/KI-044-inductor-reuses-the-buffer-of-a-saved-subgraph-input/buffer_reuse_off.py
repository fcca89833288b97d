"""KI-044 on the zoo: each model's worst gradient error with inductor and deduplication,
with inductor's buffer reuse on and off (python buffer_reuse_off.py llama gpt2 ...;
torch + transformers, offline)."""
import sys
import torch
import torch._inductor.config as ic
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))  # the checkout
from campaigns import zoo_models as zoo

def grads(name, compiled, reuse=True):
    torch._dynamo.reset(); torch.manual_seed(0)
    model, inputs = zoo.FACTORIES[name]()
    fn = model
    if compiled:
        fn = torch.compile(model, backend="inductor")
    with torch._dynamo.config.patch(use_graph_deduplication=True), ic.patch(allow_buffer_reuse=reuse):
        fn(**inputs).loss.backward()
    return [p.grad for p in model.parameters() if p.grad is not None]

for name in sys.argv[1:]:
    e = grads(name, False)
    out = []
    for reuse in (True, False):
        g = grads(name, True, reuse)
        out.append(max((a - b).abs().max().item() for a, b in zip(g, e)))
    print(f"{name}: worst grad error with buffer reuse {out[0]:.4g}, without {out[1]:.4g}", flush=True)
