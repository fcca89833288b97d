"""KI-161: dedup region spanning autocast brackets; its calls placed outside any bracket: conv gets bf16 input, f32 weight"""
import torch, torch.nn.functional as F
torch._dynamo.config.use_graph_deduplication = True
def f(x, y1, w):
    for _ in range(4):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            v = F.conv2d(x, w, padding=1)
            x = v + y1.type_as(v) + 1.0
        y1[..., :1].add_(1.0)
    return x
x, y1, w = torch.randn(2, 1, 5, dtype=torch.bfloat16), torch.randn(2, 1, 5), torch.randn(2, 2, 3, 3, requires_grad=True)
torch.compile(f, backend="aot_eager")(x, y1, w)
print("no error")
