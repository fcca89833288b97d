"""Repro (torch + transformers, offline): graph deduplication on a tiny Llama
with dynamic shapes crashes AOTAutograd; without deduplication it compiles.
Exit 1: reproduced; 0: not."""
import sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
ids = torch.randint(0, 128, (2, 8))


def run(dedup):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    with torch._dynamo.config.patch(use_graph_deduplication=dedup):
        compiled = torch.compile(model, backend="aot_eager", dynamic=True)
        compiled(input_ids=ids, labels=ids).loss.backward()


run(False)  # fine
try:
    run(True)
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {str(e).splitlines()[0][:300]}")
    sys.exit(1)
print("not reproduced"); sys.exit(0)
