"""Repro (torch + transformers, offline): graph deduplication on a tiny OPT
crashes Dynamo on the recompile after the batch doubles (automatic dynamic
shapes): "Tried to erase Node size_N but it still had 1 users in the graph".
Without deduplication both calls compile and run. Exit 1: reproduced; 0: not."""
import sys

import torch
from transformers import OPTConfig, OPTForCausalLM

config = OPTConfig(vocab_size=128, hidden_size=32, word_embed_proj_dim=32, ffn_dim=64, num_hidden_layers=3,
                   num_attention_heads=4, max_position_embeddings=64, use_cache=False, dropout=0.0,
                   attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0, pad_token_id=1, bos_token_id=2,
                   eos_token_id=2)
ids = torch.randint(4, 128, (2, 8), generator=torch.Generator().manual_seed(0))
more = torch.cat([ids, ids.flip(0)])  # the batch doubled


def run(dedup):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = OPTForCausalLM(config).eval()
    with torch._dynamo.config.patch(use_graph_deduplication=dedup):
        compiled = torch.compile(model, backend="aot_eager")
        compiled(input_ids=ids, labels=ids).loss.backward()
        compiled(input_ids=more, labels=more).loss.backward()


run(False)  # fine
try:
    run(True)
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    sys.exit(1)
print(f"not reproduced ({torch.__version__})")
sys.exit(0)
