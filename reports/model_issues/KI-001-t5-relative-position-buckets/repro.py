"""Repro (torch + transformers, offline): KI-001 on a real model. T5's encoder
and decoder compute relative-position buckets alike, except for a float
constant: ``math.log(max_distance / max_exact)`` differs (bidirectional
buckets halve ``num_buckets``). Graph deduplication merges the two regions,
mapping the float to None (``_extract_args`` in graph_region_tracker.py), so
one side computes with the other's constant: wrong buckets, a wrong loss (or an
out-of-range embedding index). Without deduplication the compile matches eager.
Exit 1: reproduced; 0: not."""
import sys

import torch
from transformers import T5Config, T5ForConditionalGeneration

config = T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=3, num_decoder_layers=3, num_heads=4,
                  relative_attention_num_buckets=8, relative_attention_max_distance=16, use_cache=False,
                  dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
ids = torch.randint(4, 128, (2, 8), generator=torch.Generator().manual_seed(0))


def loss(dedup=None):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config).eval()
    model.set_attn_implementation("eager")
    if dedup is None:
        return model(input_ids=ids, labels=ids).loss
    with torch._dynamo.config.patch(use_graph_deduplication=dedup):
        return torch.compile(model, backend="aot_eager")(input_ids=ids, labels=ids).loss


expected = loss()
assert torch.allclose(loss(dedup=False), expected, atol=1e-5), "the compile without deduplication differs"
try:
    got = loss(dedup=True)
except Exception as e:
    print(f"REPRODUCED ({torch.__version__}): {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    sys.exit(1)
if not torch.allclose(got, expected, atol=1e-5):
    print(f"REPRODUCED ({torch.__version__}): loss {got.item():.6f} with deduplication, {expected.item():.6f} in eager")
    sys.exit(1)
print(f"not reproduced ({torch.__version__}): {got.item():.6f}")
sys.exit(0)
