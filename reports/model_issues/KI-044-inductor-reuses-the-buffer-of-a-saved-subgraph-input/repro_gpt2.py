"""Repro (torch + transformers, offline): a tiny GPT-2 compiled with inductor and
graph deduplication: after backward, some parameter gradients are off by
thousands (deduplication off: right). Exit 1: reproduced; 0: not."""
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

config = GPT2Config(vocab_size=128, n_embd=32, n_inner=64, n_layer=3, n_head=4, n_positions=64, use_cache=False,
                    bos_token_id=1, eos_token_id=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
ids = torch.randint(4, 128, (2, 8), generator=torch.Generator().manual_seed(0))


def grads(dedup=None):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    model.loss_type = "ForCausalLM"
    if dedup is None:
        model(input_ids=ids, labels=ids).loss.backward()
    else:
        with torch._dynamo.config.patch(use_graph_deduplication=dedup):
            torch.compile(model, backend="inductor")(input_ids=ids, labels=ids).loss.backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def worst(got, expected):
    return max(((got[n] - g).abs().max().item(), n) for n, g in expected.items())


expected = grads()
off = worst(grads(dedup=False), expected)
assert off[0] < 1e-3, f"inductor without deduplication differs already: {off}"
on = worst(grads(dedup=True), expected)
if on[0] > 1e-3:
    print(f"REPRODUCED ({torch.__version__}): the gradient of {on[1]} is off by {on[0]:.4g} with deduplication "
          f"(without: {off[0]:.2g})")
    sys.exit(1)
print(f"not reproduced ({torch.__version__}): worst gradient difference {on[0]:.2g}")
sys.exit(0)
