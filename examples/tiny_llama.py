"""A model factory, as ``python -m harness check examples/tiny_llama.py:build`` takes it.

A factory takes no argument and returns ``(model, inputs)``. This one builds a
three-layer Llama from a config object with random weights (offline: nothing
is downloaded) and a batch of two sequences of eight token ids, labelled with
themselves so the model returns a loss to differentiate. ``use_cache=False``
keeps the outputs tensors. Needs ``pip install -e .[models]``.
"""

import torch


def build():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, use_cache=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(4, 128, (2, 8), generator=torch.Generator().manual_seed(0))
    return model, {"input_ids": ids, "labels": ids}
