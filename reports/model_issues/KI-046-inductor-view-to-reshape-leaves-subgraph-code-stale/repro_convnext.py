"""Repro (torch + transformers, offline): tiny ConvNeXt, torch.compile(backend="inductor")
with torch._dynamo.config.use_graph_deduplication=True, forward + backward.
Usage: python repro_model.py [inductor|aot_eager] [dedup|nodedup]  (default: inductor dedup)
Exit 1: reproduced (crash); 0: not reproduced."""
import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()  # private cache: never hit a stale artifact
import torch
from transformers import ConvNextConfig, ConvNextForImageClassification

backend = sys.argv[1] if len(sys.argv) > 1 else "inductor"
dedup = (sys.argv[2] if len(sys.argv) > 2 else "dedup") == "dedup"

config = ConvNextConfig(num_channels=3, hidden_sizes=[16, 32, 64], depths=[3, 3, 3], num_stages=3,
                        drop_path_rate=0.0, num_labels=10, image_size=32)
torch.manual_seed(0)
model = ConvNextForImageClassification(config).eval()
g = torch.Generator().manual_seed(0)
inputs = {"pixel_values": torch.randn(2, 3, 32, 32, generator=g),
          "labels": torch.randint(0, 10, (2,), generator=g)}

torch._dynamo.config.use_graph_deduplication = dedup
try:
    torch.compile(model, backend=backend)(**inputs).loss.backward()
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    sys.exit(1)
print(f"not reproduced ({torch.__version__}, backend={backend}, dedup={dedup})")
sys.exit(0)
