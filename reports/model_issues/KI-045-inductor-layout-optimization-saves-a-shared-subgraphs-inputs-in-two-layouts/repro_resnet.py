"""Tiny transformers ResNet (eval), torch.compile(backend=inductor) with
torch._dynamo.config.use_graph_deduplication=True, forward+backward.
Exit 1 + 'REPRODUCED (<ver>): <msg>' on crash, exit 0 'not reproduced' otherwise.
Optional argv: backend (default inductor), dedup flag (1/0, default 1)."""
import os, sys
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import ResNetConfig, ResNetForImageClassification

backend = sys.argv[1] if len(sys.argv) > 1 else "inductor"
dedup = (sys.argv[2] != "0") if len(sys.argv) > 2 else True
torch._dynamo.config.use_graph_deduplication = dedup

torch.manual_seed(0)
config = ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[3, 3],
                      layer_type="basic", num_labels=10)
model = ResNetForImageClassification(config).eval()
g = torch.Generator().manual_seed(0)
inputs = {"pixel_values": torch.randn(2, 3, 32, 32, generator=g),
          "labels": torch.randint(0, 10, (2,), generator=g)}
model(**inputs).loss.backward()  # eager: fine
model.zero_grad()
try:
    torch.compile(model, backend=backend)(**inputs).loss.backward()
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    sys.exit(1)
print(f"not reproduced ({torch.__version__}) [backend={backend}, dedup={dedup}]")
sys.exit(0)
