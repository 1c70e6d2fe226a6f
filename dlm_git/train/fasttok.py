"""Encode with the base's Rust tokenizer directly where transformers would encode the same.

Invariant: `FastTokenizer.load(base)` returns a tokenizer only when AutoTokenizer would load
the generic class (`GENERIC_CLASS`, a config.json `model_type` in `GENERIC_MODEL_TYPES`)
and every tokenizer_config.json key is on `INERT_CONFIG_KEYS`, no `UNREAD_FILES` exist and
tokenizer.json sets no truncation or padding (each read in transformers' source: none of
what is let through alters the Rust `tokenizers.Tokenizer` it loads, or the ids of
`tokenizer(text, add_special_tokens=s)["input_ids"]`, i.e. `encode(text, s)` with no
truncation, no padding and `encode_special_tokens=False`). Anything else is None: the
caller loads `AutoTokenizer` as before. So the ids are AutoTokenizer's for every input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm_git.safeparse import load_json

GENERIC_CLASS = "PreTrainedTokenizerFast"
NAMED_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
"""transformers' `SPECIAL_TOKENS_ATTRIBUTES`: the named tokens of `special_tokens_map`."""
INERT_CONFIG_KEYS = frozenset(
    {
        "tokenizer_class",
        "model_max_length",
        "chat_template",
        "clean_up_tokenization_spaces",
        *NAMED_TOKENS,
    }
)
"""tokenizer_config.json keys whose effect on a `PreTrainedTokenizerFast` load is known:
- tokenizer_class: must be the generic class (checked), which loads tokenizer.json as is;
- named tokens: only registered; each must already be a special added token of
  tokenizer.json (checked), so transformers adds nothing to the Rust tokenizer;
- model_max_length: read only when truncation is asked for (never here) or to warn;
- chat_template: read only by `apply_chat_template`, which renders text;
- clean_up_tokenization_spaces: read only by `decode`."""
GENERIC_MODEL_TYPES = frozenset({"llama", "gpt_neox"})
"""config.json `model_type`s for which AutoTokenizer loads the generic class a
tokenizer_config.json names: each is outside transformers' `MODELS_WITH_INCORRECT_HUB_
TOKENIZER_CLASS` (for those, e.g. qwen2, it loads the model's own class, which rebuilds
the Rust tokenizer) and not a Mistral one, so the hub class is trusted."""
UNREAD_FILES = ("special_tokens_map.json", "added_tokens.json", "additional_chat_templates")
"""What transformers merges into the tokenizer on load: present, the fast path is off
(`additional_chat_templates/`: its `default.jinja` replaces tokenizer_config.json's
template, any other name makes the templates a dict with no default)."""
MAX_VOCAB = 100_000
"""Above this transformers may patch the pre-tokenizer's regex (`_patch_mistral_regex`)."""


@dataclass(frozen=True)
class FastTokenizer:
    """The base's tokenizer.json as transformers would leave it, and its special tokens."""

    backend: Any  # tokenizers.Tokenizer
    special_tokens: dict[str, str]  # transformers' `special_tokens_map`
    chat_template: str | None  # from tokenizer_config.json (None: none there)

    @staticmethod
    def load(base_path: Path) -> FastTokenizer | None:
        """The fast tokenizer of `base_path`; None where transformers might encode otherwise."""
        config = _inert_config(base_path)
        if config is None:
            return None
        from tokenizers import Tokenizer, processors

        backend = Tokenizer.from_file(str(base_path / "tokenizer.json"))
        special = {k: v for k in NAMED_TOKENS if (v := _token_text(config.get(k))) is not None}
        if not _registered(backend, special.values()):
            return None
        if backend.truncation is not None or backend.padding is not None:
            return None
        if backend.get_vocab_size() > MAX_VOCAB:
            return None
        if backend.post_processor is None:  # what `update_post_processor` installs, no bos/eos
            backend.post_processor = processors.TemplateProcessing(
                single="$A:0", pair="$A:0 $B:1", special_tokens=[]
            )
        backend.encode_special_tokens = False
        template = config.get("chat_template")
        return FastTokenizer(backend, special, template if isinstance(template, str) else None)

    def encode(self, text: str, special: bool) -> list[int]:
        return list(self.backend.encode(text, add_special_tokens=special).ids)

    def token_id(self, name: str) -> int | None:
        """The id of a named special token (`eos_token`, ...), as `convert_tokens_to_ids`."""
        text = self.special_tokens.get(name)
        if text is None:
            return None
        found = self.backend.token_to_id(text)
        return None if found is None else int(found)


def _inert_config(base_path: Path) -> dict[str, Any] | None:
    """tokenizer_config.json where every key is inert and the class generic, else None."""
    from dlm_git.base.resolve import read_config

    config_path = base_path / "tokenizer_config.json"
    if not (base_path / "tokenizer.json").is_file() or not config_path.is_file():
        return None
    model = read_config(base_path)  # AutoTokenizer picks the class by its model_type too
    if model is None or model.get("model_type") not in GENERIC_MODEL_TYPES:
        return None
    if "model_name" in model or "tokenizer_class" in model:
        return None
    if any((base_path / name).exists() for name in UNREAD_FILES):
        return None
    try:
        config = load_json(config_path.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError, OSError):
        return None
    if not isinstance(config, dict) or not set(config) <= INERT_CONFIG_KEYS:
        return None
    if config.get("tokenizer_class") != GENERIC_CLASS:
        return None
    if any(config.get(k) is not None and _token_text(config.get(k)) is None for k in NAMED_TOKENS):
        return None
    return config


def _token_text(value: object) -> str | None:
    """A named token's text: a string, or an AddedToken dict's `content` (None: neither)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("__type") == "AddedToken":
        content = value.get("content")
        return content if isinstance(content, str) else None
    return None


def _registered(backend: Any, tokens: Any) -> bool:
    """Whether every token is already a special added token of the Rust tokenizer."""
    added = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
    return all(token in added for token in tokens)
