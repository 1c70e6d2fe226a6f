"""Tokenize rows into fixed training sequences.

Invariants:
- Tokenization of a row depends only on (row, tokenizer state, sequence_len); the result
  is a list of `Sequence`s (input ids and labels, -100 where no loss is taken) whose labels
  are the ids with a masked prefix (see dlm_git.token_stream).
- A `tokens/` directory holds a `TokenStream` as safetensors + canonical JSON, never
  pickle; loading it recomputes every row's leaf and checks the stream root it records.
- Ids are AutoTokenizer's: where `FastTokenizer.load` proves the base's Rust tokenizer
  encodes the same (dlm_git.train.fasttok) it encodes, and a chat template in
  tokenizer_config.json is rendered by transformers' own renderer with the same special
  tokens; otherwise AutoTokenizer does both, as it always did.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from dlm_git.base.errors import BaseModelError
from dlm_git.hashing import canonical_json
from dlm_git.safeparse import dig, load_json
from dlm_git.token_stream import IGNORE_INDEX, Sequence, TokenStream, token_stream_root
from dlm_git.train.fasttok import FastTokenizer
from dlm_git.train.rows import PLAIN_SYSTEM, PLAIN_TEMPLATE, Row

TOKENS_FILE = "tokens.safetensors"
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
TOKENS_INDEX = "tokens.json"


class RowTokenizer:
    """Renders and tokenizes rows with one tokenizer (loaded lazily: a warm cache needs none)."""

    def __init__(self, base_path: Path, system_prompt: str | None, sequence_len: int) -> None:
        self.base_path = base_path
        self.system_prompt = system_prompt
        self.sequence_len = sequence_len
        self.template_in_file = chat_template_in_file(base_path)
        self.chat_template = self.template_in_file or config_chat_template(base_path)
        self._tok: Any = None

    @property
    def tokenizer(self) -> Any:
        if self._tok is None:
            from transformers import AutoTokenizer
            from transformers.utils import logging as hf_logging

            from dlm_git.base.resolve import check_native_tokenizer

            check_native_tokenizer(self.base_path)

            hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
            # never run code shipped with a base (its config is loaded with the same flag)
            self._tok = AutoTokenizer.from_pretrained(str(self.base_path), trust_remote_code=False)
            if self.chat_template and not getattr(self._tok, "chat_template", None):
                raise ValueError(f"{self.base_path}: chat template in files but not loaded")
        return self._tok

    @functools.cached_property
    def fast(self) -> FastTokenizer | None:
        """The base's Rust tokenizer where it encodes as `tokenizer` would (see fasttok)."""
        return FastTokenizer.load(self.base_path)  # reads config.json as the loader's check

    def eos_id(self) -> int:
        fast = self.fast
        eos = fast.token_id("eos_token") if fast else self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError("tokenizer has no eos token")
        return int(eos)

    def has_chat_template(self) -> bool:
        return self.chat_template

    def _encode(self, text: str, special: bool) -> list[int]:
        if fast := self.fast:
            return fast.encode(text, special)
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        """The chat template applied to `messages`, as text (as `apply_chat_template` renders)."""
        fast = self.fast
        if fast is None or fast.chat_template is None or self.template_in_file:
            templates = getattr(self.tokenizer, "chat_template", None)
            if isinstance(templates, dict) and "default" not in templates:
                from dlm_git.base.resolve import CHAT_TEMPLATE_DIR

                raise BaseModelError(
                    str(self.base_path / CHAT_TEMPLATE_DIR),
                    f"named chat templates {sorted(templates)!r:.120} and none is the default",
                    f"add {CHAT_TEMPLATE_DIR}/default.jinja, or a chat_template to"
                    " tokenizer_config.json",
                )
            return str(
                self.tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=generation_prompt
                )
            )
        from transformers.utils import chat_template_utils

        # what apply_chat_template calls (annotated `-> str`, it returns (texts, indices))
        render: Any = chat_template_utils.render_jinja_template
        rendered, _ = render(
            conversations=[messages],
            chat_template=fast.chat_template,
            add_generation_prompt=generation_prompt,
            **fast.special_tokens,
        )
        return str(rendered[0])

    def tokenize(self, row: Row) -> list[Sequence]:
        if row.kind == "text":
            return self._text(row)
        return [self._chat(row)]

    def _text(self, row: Row) -> list[Sequence]:
        ids = self._encode(row.content(), True) + [self.eos_id()]
        n = self.sequence_len
        out = []
        for start in range(0, len(ids), n):
            window = np.asarray(ids[start : start + n], dtype=np.int32)
            if len(window) < 2:  # a lone trailing token carries no next-token target
                continue
            out.append(Sequence(row.row_id, window, window.copy()))
        return out

    def _chat(self, row: Row) -> Sequence:
        assert row.section is not None  # chat rows come from instruction sections
        question = row.section.question or ""
        answer = row.section.answer or ""
        if self.has_chat_template():
            messages = []
            if self.system_prompt:
                messages.append({"role": "system", "content": self.system_prompt})
            messages.append({"role": "user", "content": question})
            prompt = self._render(messages, True)
            full = self._render([*messages, {"role": "assistant", "content": answer}], False)
            if not full.startswith(prompt):
                raise ValueError("chat template renders the prompt inconsistently")
            completion = full[len(prompt) :]
            prompt_ids = self._encode(prompt, False)
            completion_ids = self._encode(completion, False)
        else:
            system = PLAIN_SYSTEM.format(system=self.system_prompt) if self.system_prompt else ""
            prompt_ids = self._encode(system + PLAIN_TEMPLATE.format(question=question), True)
            completion_ids = self._encode(answer, False)
        eos = self.eos_id()
        if not completion_ids or completion_ids[-1] != eos:
            completion_ids = completion_ids + [eos]
        ids = (prompt_ids + completion_ids)[: self.sequence_len]
        labels = ([IGNORE_INDEX] * len(prompt_ids) + completion_ids)[: self.sequence_len]
        return Sequence(
            row.row_id, np.asarray(ids, dtype=np.int32), np.asarray(labels, dtype=np.int32)
        )


def chat_template_in_file(base_path: Path) -> bool:
    """Whether the base's template is in a file of its own (rendered through AutoTokenizer,
    as transformers' loader finds it; `chat_template.json` is its older form)."""
    return any((base_path / name).is_file() for name in CHAT_TEMPLATE_FILES)


def config_chat_template(base_path: Path) -> bool:
    """Whether the base's `tokenizer_config.json` holds a chat template (no tokenizer
    load); with `chat_template_in_file`, whether the base ships one at all."""
    config = base_path / "tokenizer_config.json"
    if config.is_file():
        # a third-party file read for one key, as transformers reads it (a lone surrogate
        # in some token's text is its business)
        config_json = load_json(config.read_text("utf-8"), text_only=False)
        return bool(dig(config_json, "chat_template"))
    return False


def save_tokens(directory: Path, stream: TokenStream, info: dict[str, Any]) -> None:
    """Write a token stream as one safetensors file + a canonical JSON index (atomic)."""
    from safetensors.numpy import save

    from dlm_git.fsutil import atomic_write_bytes

    tensors: dict[str, np.ndarray] = {
        "input_ids": stream.ids,
        "labels": stream.labels,
        "lengths": stream.lengths.astype(np.int64),
    }
    index = {**info, "rows": [[row_id, n] for row_id, n in stream.row_counts]}
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(directory / TOKENS_FILE, save(tensors, metadata={"format": "np"}))
    atomic_write_bytes(directory / TOKENS_INDEX, canonical_json(index))


def load_tokens(directory: Path) -> tuple[TokenStream, list[bytes], dict[str, Any]]:
    """The token stream, per-row leaf hashes and the index of a tokens directory.

    Raises ValueError if the files are corrupt (not safetensors, not JSON, wrongly shaped)
    or inconsistent with each other."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from dlm_git.safeparse import load_json

    try:
        index = load_json((directory / TOKENS_INDEX).read_text("utf-8"))
        arrays = load_file(str(directory / TOKENS_FILE))
        for name in ("lengths", "input_ids", "labels"):
            if arrays[name].ndim != 1 or arrays[name].dtype.kind not in "iu":
                raise ValueError(f"{TOKENS_FILE}: {name} is not a 1-D integer array")
        rows = index["rows"]
        stream = TokenStream.from_labels(
            [str(r) for r, _ in rows],
            [int(n) for _, n in rows],
            arrays["lengths"],
            arrays["input_ids"],
            arrays["labels"],
        )
    except (SafetensorError, UnicodeDecodeError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{directory.name}/ is corrupt ({type(exc).__name__}: {exc})") from None
    leaves = stream.leaves()
    if token_stream_root(leaves) != index.get("stream_root"):
        raise ValueError("token stream root does not match the index")
    return stream, leaves, index
