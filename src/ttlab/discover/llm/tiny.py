"""A tiny random-initialised causal LM with a byte-level tokenizer, written in the Hugging Face layout.

Tests, the `debug` preset and the CPU benchmark need a real `transformers` model directory without any
download. `make_tiny_model(path)` writes `config.json` + `model.safetensors` (random weights from a
2-layer Qwen2/Llama config) and a `tokenizer.json` whose vocabulary is the 256 byte symbols of GPT-2's
byte-level BPE (no merges) plus `<|pad|>`, `<|endoftext|>` and a small chat template, so every string
round-trips exactly and `AutoModelForCausalLM.from_pretrained(path)` / `AutoTokenizer` load it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ("<|pad|>", "<|endoftext|>")


def byte_tokenizer():
    """A `PreTrainedTokenizerFast` over the 256 byte-level symbols + pad/eos (ids 256, 257)."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()  # the 256 printable stand-ins for bytes
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    for j, s in enumerate(SPECIALS):
        vocab[s] = 256 + j
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIALS))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=SPECIALS[0], eos_token=SPECIALS[1])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def make_tiny_model(path: str | Path, hidden: int = 64, layers: int = 2, heads: int = 4, arch: str = "qwen2",
                    intermediate: int | None = None, seed: int = 0, chat_template: bool = True) -> Path:
    """Write a random `arch` ("qwen2" or "llama") causal LM + byte tokenizer to `path`; returns `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = byte_tokenizer()
    if not chat_template:
        tok.chat_template = None
    kw = dict(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
              num_key_value_heads=max(1, heads // 2), intermediate_size=intermediate or 4 * hidden,
              max_position_embeddings=4096, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
              bos_token_id=tok.eos_token_id, tie_word_embeddings=True)
    if arch == "qwen2":
        cfg = Qwen2Config(**kw)
    elif arch == "llama":
        cfg = LlamaConfig(**kw)
    else:
        raise ValueError(f"make_tiny_model: arch must be 'qwen2' or 'llama', got {arch!r}")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
