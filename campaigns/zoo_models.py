"""A zoo of tiny, offline ``transformers`` models for graph-deduplication runs.

Every factory takes no arguments and returns ``(model, inputs)``: ``model`` is an
``nn.Module`` built from a config object with random weights (nothing is
downloaded: no ``from_pretrained``, no tokenizer, no hub access), ``inputs`` a
dict of keyword tensors to call it with (``model(**inputs)``). Each text model has
three identical layers (the repeated blocks deduplication should find), hidden
size 32-64, vocabulary 128, and inputs of batch 2 by sequence 8, built under
``torch.manual_seed(0)`` so two calls give the same weights and inputs. Models
come back in ``eval()`` mode; every dropout probability in the config is 0, so
``train()`` mode is deterministic too. Caches are off (``use_cache=False``) so
outputs hold tensors only.

Inputs: ``input_ids`` avoid the special token ids (0-3); ``attention_mask``
masks the last two positions of the second sequence (right padding, so the
mask path is exercised and every query still sees a key); ``labels`` copy the
ids with the padded positions set to -100.

Resolve a factory by attribute (``campaigns.zoo_models:llama``) or by name through
``FACTORIES``. Needs the optional dependency group ``models``
(``pip install -e .[models]``).

Vision models (``vit``, ``convnext``, ``resnet``) are transformers' own
implementations (no torchvision: none on PyPI installs next to torch 2.13),
on 32x32 images of batch 2 with class labels.

Every family here runs in eager. What the compile makes of them (torch 2.13,
aot_eager, deduplication on; ``python -m harness zoo``): ``t5`` (SDPA) crashes
in the compiled forward (KI-042), ``t5_eager_attention`` gives wrong outputs
and gradients (KI-001: the encoder's and decoder's relative-position buckets
differ only in a float constant), decoder models crash on a shape change
(KI-041; OPT: KI-043), ResNet in ``train()`` meets KI-008 (batch norm's
buffer updates).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

VOCAB = 128
BATCH = 2
SEQ = 8
LAYERS = 3
HIDDEN = 32
HEADS = 4
KV_HEADS = 2
FFN = 64
# Ids below this are special (pad/bos/eos/decoder start) in every config here.
FIRST_ORDINARY_ID = 4

__all__ = [
    "FACTORIES",
    "llama",
    "mistral",
    "qwen2",
    "gemma",
    "phi3",
    "opt",
    "gpt2",
    "bert",
    "bart",
    "t5",
    "t5_eager_attention",
    "vit",
    "convnext",
    "resnet",
]


def _zero_dropout(config) -> None:
    """Sets every dropout-like probability in ``config`` (and its sub-configs)
    to 0.0, whatever the family calls it."""
    for key, value in list(config.to_dict().items()):
        if not isinstance(value, float):
            continue
        name = key.lower()
        if "drop" in name:  # dropout, *_dropout, *_pdrop, *_dropout_prob, *_dropout_rate, *layerdrop
            setattr(config, key, 0.0)


def _check_no_dropout(model: nn.Module) -> None:
    for name, module in model.named_modules():
        if isinstance(module, nn.Dropout) and module.p != 0.0:
            raise AssertionError(f"{type(model).__name__}: dropout {name} has p={module.p}")


def _build(model_cls, config) -> nn.Module:
    _zero_dropout(config)
    torch.manual_seed(0)
    model = model_cls(config)
    _check_no_dropout(model)
    return model.eval()


def _text_inputs(labels: bool = True) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(FIRST_ORDINARY_ID, VOCAB, (BATCH, SEQ), generator=g)
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    attention_mask[1, -2:] = 0
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if labels:
        inputs["labels"] = input_ids.masked_fill(attention_mask == 0, -100)
    return inputs


def _decoder_common() -> dict:
    """Llama-style decoder settings shared by Llama, Mistral, Qwen2, Gemma, Phi3."""
    return dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=64,
        use_cache=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )


# --- decoder-only -----------------------------------------------------------


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**_decoder_common(), num_key_value_heads=KV_HEADS)
    return _build(LlamaForCausalLM, config), _text_inputs()


def mistral():
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(**_decoder_common(), num_key_value_heads=KV_HEADS, head_dim=HIDDEN // HEADS, sliding_window=None)
    return _build(MistralForCausalLM, config), _text_inputs()


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**_decoder_common(), num_key_value_heads=KV_HEADS, use_sliding_window=False)
    return _build(Qwen2ForCausalLM, config), _text_inputs()


def gemma():
    from transformers import GemmaConfig, GemmaForCausalLM

    config = GemmaConfig(**_decoder_common(), num_key_value_heads=KV_HEADS, head_dim=HIDDEN // HEADS)
    return _build(GemmaForCausalLM, config), _text_inputs()


def phi3():
    from transformers import Phi3Config, Phi3ForCausalLM

    config = Phi3Config(**_decoder_common(), num_key_value_heads=KV_HEADS, original_max_position_embeddings=64)
    return _build(Phi3ForCausalLM, config), _text_inputs()


def opt():
    from transformers import OPTConfig, OPTForCausalLM

    config = OPTConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        word_embed_proj_dim=HIDDEN,
        ffn_dim=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=64,
        use_cache=False,
        pad_token_id=1,
        bos_token_id=2,
        eos_token_id=2,
    )
    return _build(OPTForCausalLM, config), _text_inputs()


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_embd=HIDDEN,
        n_inner=FFN,
        n_layer=LAYERS,
        n_head=HEADS,
        n_positions=64,
        use_cache=False,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = _build(GPT2LMHeadModel, config)
    # The class name matches no loss in transformers' LOSS_MAPPING, so the loss
    # lookup logs a warning, which Dynamo graph-breaks on; name the loss.
    model.loss_type = "ForCausalLM"
    return model, _text_inputs()


# --- encoder-only -----------------------------------------------------------


def bert():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=0,
    )
    return _build(BertForMaskedLM, config), _text_inputs()


# --- encoder-decoder --------------------------------------------------------


def bart():
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN,
        max_position_embeddings=64,
        use_cache=False,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=2,
    )
    # labels are shifted right into decoder_input_ids by the model.
    return _build(BartForConditionalGeneration, config), _text_inputs()


def t5():
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        d_kv=HIDDEN // HEADS,
        d_ff=FFN,
        num_layers=LAYERS,
        num_decoder_layers=LAYERS,
        num_heads=HEADS,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        use_cache=False,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    # labels are shifted right into decoder_input_ids by the model.
    return _build(T5ForConditionalGeneration, config), _text_inputs()


def t5_eager_attention():
    """T5 with transformers' eager (matmul + softmax) attention instead of SDPA."""
    model, inputs = t5()
    model.set_attn_implementation("eager")
    return model, inputs


# --- vision (transformers' own implementations: no torchvision needed) ------

IMAGE = 32


def _image_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),
            "labels": torch.randint(0, 10, (BATCH,), generator=g)}


def vit():
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=IMAGE, patch_size=8, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                       num_attention_heads=HEADS, intermediate_size=FFN, num_labels=10)
    return _build(ViTForImageClassification, config), _image_inputs()


def convnext():
    from transformers import ConvNextConfig, ConvNextForImageClassification

    # three stages of depth 3: each stage's blocks repeat
    config = ConvNextConfig(num_channels=3, hidden_sizes=[16, 32, 64], depths=[3, 3, 3], num_stages=3,
                            drop_path_rate=0.0, num_labels=10, image_size=IMAGE)
    return _build(ConvNextForImageClassification, config), _image_inputs()


def resnet():
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[3, 3],
                          layer_type="basic", num_labels=10)
    return _build(ResNetForImageClassification, config), _image_inputs()


FACTORIES: dict[str, Callable[[], tuple[nn.Module, dict[str, torch.Tensor]]]] = {
    "llama": llama,
    "mistral": mistral,
    "qwen2": qwen2,
    "gemma": gemma,
    "phi3": phi3,
    "opt": opt,
    "gpt2": gpt2,
    "bert": bert,
    "bart": bart,
    "t5": t5,
    "t5_eager_attention": t5_eager_attention,
    "vit": vit,
    "convnext": convnext,
    "resnet": resnet,
}
