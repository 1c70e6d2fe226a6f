"""The published architectures `dlm-git base build` makes: each family's transformers
`model_type`, the values of its published `config.json` that give it its shape, and its
tokenizer's special tokens and chat template.

Invariant: every value here is a published one, and where it was read is named beside it
(the family's `source` repository, or the comment); a build's bytes are a function of these
values (they enter the build spec), so changing one names another base.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CHATML_TURNS = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _chatml_with_default_system(system: str) -> str:
    """ChatML that adds `system` as the first turn when the conversation has none."""
    return (
        "{% if messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\n" + system + "<|im_end|>\n' }}"
        "{% endif %}" + CHATML_TURNS
    )


@dataclass(frozen=True)
class Family:
    """One published architecture: its transformers `model_type`, the values of its
    published `config.json` that give it its shape, and its tokenizer's special tokens."""

    name: str
    source: str
    """The public repository whose config.json the values come from."""
    model_type: str
    config: Mapping[str, Any]
    special_tokens: tuple[str, ...]
    bos: str | None
    eos: str
    pad: str
    chat_template: str | None
    notes: str = ""
    tokenizer_extra: Mapping[str, Any] = field(default_factory=dict)


_QWEN25: dict[str, Any] = {
    # the values Qwen2.5's published config.json files share (Qwen/Qwen2.5-0.5B-Instruct's
    # read here; `sliding_window`/`max_window_layers` are inert with use_sliding_window off)
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "max_window_layers": 21,
    "use_sliding_window": False,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "vocab_size": 151936,
}
_QWEN25_TOKENS: dict[str, Any] = {
    "special_tokens": ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
    "bos": None,
    "eos": "<|im_end|>",
    "pad": "<|endoftext|>",
    "chat_template": _chatml_with_default_system(
        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    ),
}

FAMILIES: dict[str, Family] = {
    "smollm2-135m": Family(
        name="smollm2-135m",
        source="HuggingFaceTB/SmolLM2-135M-Instruct",
        model_type="llama",
        config={
            "hidden_size": 576,
            "intermediate_size": 1536,
            "num_hidden_layers": 30,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "max_position_embeddings": 8192,
            "rms_norm_eps": 1e-5,
            "rope_theta": 100000.0,
            "tie_word_embeddings": True,
            "hidden_act": "silu",
            "initializer_range": 0.041666666666666664,
            "attention_bias": False,
            "mlp_bias": False,
            "vocab_size": 49152,
        },
        special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
        bos="<|im_start|>",
        eos="<|im_end|>",
        pad="<|im_end|>",
        chat_template=_chatml_with_default_system(
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
        ),
        notes="Llama: q/k/v/o and gate/up/down projections, grouped-query attention, tied",
    ),
    "qwen2.5-0.5b": Family(
        name="qwen2.5-0.5b",
        source="Qwen/Qwen2.5-0.5B-Instruct",
        model_type="qwen2",
        config={
            **_QWEN25,
            "hidden_size": 896,
            "intermediate_size": 4864,
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
        },
        **_QWEN25_TOKENS,
        notes="Qwen2: Llama-like names, biases on q/k/v, its own default system turn",
    ),
    # The most common base of real DLM documents. Its shape: the model card of
    # Qwen/Qwen2.5-Coder-1.5B-Instruct (28 layers; 12 query and 2 key-value heads; RoPE,
    # SwiGLU, RMSNorm, q/k/v bias, tied embeddings; 1.54B parameters, 1.31B without the
    # embedding; config.json set for 32,768 positions) and the Qwen2.5-Coder technical
    # report's table (arXiv:2409.12186: hidden 1,536, intermediate 8,960); the rest is
    # the Qwen2.5 family's config.json (`_QWEN25`). With these values the parameter count
    # is 1,543,714,304 (1,310,340,608 without the embedding), as the card says.
    "qwen2.5-coder-1.5b": Family(
        name="qwen2.5-coder-1.5b",
        source="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        model_type="qwen2",
        config={
            **_QWEN25,
            "hidden_size": 1536,
            "intermediate_size": 8960,
            "num_hidden_layers": 28,
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
        },
        **_QWEN25_TOKENS,
        notes="Qwen2 at 1.5B: as qwen2.5-0.5b, wider and deeper (12/2 heads, 28 layers)",
    ),
    "pythia-70m": Family(
        name="pythia-70m",
        source="EleutherAI/pythia-70m",
        model_type="gpt_neox",
        config={
            "hidden_size": 512,
            "intermediate_size": 2048,
            "num_hidden_layers": 6,
            "num_attention_heads": 8,
            "max_position_embeddings": 2048,
            "layer_norm_eps": 1e-5,
            "rotary_pct": 0.25,
            "rotary_emb_base": 10000,
            "use_parallel_residual": True,
            "tie_word_embeddings": False,
            "hidden_act": "gelu",
            "initializer_range": 0.02,
            "vocab_size": 50304,
        },
        special_tokens=("<|endoftext|>", "<|padding|>"),
        bos="<|endoftext|>",
        eos="<|endoftext|>",
        pad="<|padding|>",
        chat_template=None,
        notes="GPT-NeoX: fused query_key_value, dense, dense_h_to_4h/4h_to_h; no chat template",
    ),
}
