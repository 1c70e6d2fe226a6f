"""Tokenize rows into fixed training sequences; the token stream root binds them.

Invariants:
- Tokenization of a row depends only on (row, tokenizer state, sequence_len); the result
  is a list of `Sequence`s (input ids and labels, -100 where no loss is taken).
- The token stream root is the Merkle root with one leaf per row, rows in document order:
  `row_id || 0x00 || payload`, where `payload` is
  `u32le(count) || count x u32le(length) || all input_ids i32le || all labels i32le`
  over the row's sequences (windows) in order. The token cache stores exactly `payload`
  and checks it against this leaf hash, so a cache hit costs one hash and no re-encoding.
- Tokens are stored as safetensors + canonical JSON, never pickle.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlm_git.hashing import canonical_json, merkle_leaf_hash, merkle_root_from_leaf_hashes
from dlm_git.train.rows import PLAIN_SYSTEM, PLAIN_TEMPLATE, Row

IGNORE_INDEX = -100
TOKENS_FILE = "tokens.safetensors"
TOKENS_INDEX = "tokens.json"


@dataclass(frozen=True)
class Sequence:
    row_id: str
    input_ids: np.ndarray  # int32, 1-D
    labels: np.ndarray  # int32, 1-D, IGNORE_INDEX where masked


class RowTokenizer:
    """Renders and tokenizes rows with one tokenizer (loaded lazily: a warm cache needs none)."""

    def __init__(self, base_path: Path, system_prompt: str | None, sequence_len: int) -> None:
        self.base_path = base_path
        self.system_prompt = system_prompt
        self.sequence_len = sequence_len
        self.chat_template = has_chat_template_files(base_path)
        self._tok: Any = None

    @property
    def tokenizer(self) -> Any:
        if self._tok is None:
            from transformers import AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
            self._tok = AutoTokenizer.from_pretrained(str(self.base_path))
            if self.chat_template and not getattr(self._tok, "chat_template", None):
                raise ValueError(f"{self.base_path}: chat template in files but not loaded")
        return self._tok

    def eos_id(self) -> int:
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError("tokenizer has no eos token")
        return int(eos)

    def has_chat_template(self) -> bool:
        return self.chat_template

    def _encode(self, text: str, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def tokenize(self, row: Row) -> list[Sequence]:
        if row.kind == "text":
            return self._text(row)
        return [self._chat(row)]

    def _text(self, row: Row) -> list[Sequence]:
        ids = self._encode(row.section.content, True) + [self.eos_id()]
        n = self.sequence_len
        out = []
        for start in range(0, len(ids), n):
            window = np.asarray(ids[start : start + n], dtype=np.int32)
            if len(window) < 2:  # a lone trailing token carries no next-token target
                continue
            out.append(Sequence(row.row_id, window, window.copy()))
        return out

    def _chat(self, row: Row) -> Sequence:
        question = row.section.question or ""
        answer = row.section.answer or ""
        if self.has_chat_template():
            messages = []
            if self.system_prompt:
                messages.append({"role": "system", "content": self.system_prompt})
            messages.append({"role": "user", "content": question})
            prompt = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            full = self.tokenizer.apply_chat_template(
                [*messages, {"role": "assistant", "content": answer}], tokenize=False
            )
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


def has_chat_template_files(base_path: Path) -> bool:
    """Whether the base ships a chat template, decided from its files (no tokenizer load)."""
    import json

    if (base_path / "chat_template.jinja").is_file() or (
        base_path / "chat_template.json"
    ).is_file():
        return True
    config = base_path / "tokenizer_config.json"
    if config.is_file():
        return bool(json.loads(config.read_text("utf-8")).get("chat_template"))
    return False


def row_payload(sequences: list[Sequence]) -> bytes:
    """The canonical encoding of one row's sequences (see the module docstring)."""
    lengths = np.asarray([len(s.input_ids) for s in sequences], dtype="<u4")
    if sequences:
        ids = np.concatenate([s.input_ids for s in sequences]).astype("<i4", copy=False)
        labels = np.concatenate([s.labels for s in sequences]).astype("<i4", copy=False)
    else:
        ids = labels = np.zeros(0, dtype="<i4")
    return struct.pack("<I", len(sequences)) + lengths.tobytes() + ids.tobytes() + labels.tobytes()


def row_leaf_hash(row_id: str, payload: bytes | memoryview) -> bytes:
    return merkle_leaf_hash(row_id.encode("ascii"), b"\x00", payload)


def token_stream_root(leaf_hashes: list[bytes]) -> str:
    """Merkle root over per-row leaf hashes (`row_leaf_hash`), rows in document order."""
    return merkle_root_from_leaf_hashes(leaf_hashes)


def save_tokens(
    directory: Path,
    sequences: list[Sequence],
    row_counts: list[tuple[str, int]],
    info: dict[str, Any],
) -> None:
    """Write sequences as one safetensors file + a canonical JSON index (atomic writes)."""
    from safetensors.numpy import save

    from dlm_git.fsutil import atomic_write_bytes

    empty = np.zeros(0, dtype=np.int32)
    tensors: dict[str, np.ndarray] = {
        "input_ids": np.concatenate([s.input_ids for s in sequences]).astype(np.int32)
        if sequences
        else empty,
        "labels": np.concatenate([s.labels for s in sequences]).astype(np.int32)
        if sequences
        else empty,
        "lengths": np.asarray([len(s.input_ids) for s in sequences], dtype=np.int64),
    }
    index = {**info, "rows": [[row_id, n] for row_id, n in row_counts]}
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(directory / TOKENS_FILE, save(tensors, metadata={"format": "np"}))
    atomic_write_bytes(directory / TOKENS_INDEX, canonical_json(index))


def load_tokens(directory: Path) -> tuple[list[Sequence], list[bytes], dict[str, Any]]:
    """Sequences, per-row leaf hashes and the index of a tokens directory.

    Raises ValueError if the files are inconsistent with each other."""
    import json

    from safetensors.numpy import load_file

    index = json.loads((directory / TOKENS_INDEX).read_text("utf-8"))
    arrays = load_file(str(directory / TOKENS_FILE))
    lengths = arrays["lengths"].tolist()
    ids, labels = arrays["input_ids"], arrays["labels"]
    if sum(lengths) != len(ids) or len(ids) != len(labels):
        raise ValueError("token arrays and lengths disagree")
    sequences: list[Sequence] = []
    leaves: list[bytes] = []
    offset = seq = 0
    for row_id, count in index["rows"]:
        group = []
        for n in lengths[seq : seq + count]:
            group.append(Sequence(row_id, ids[offset : offset + n], labels[offset : offset + n]))
            offset += n
        seq += count
        sequences.extend(group)
        leaves.append(row_leaf_hash(row_id, row_payload(group)))
    if seq != len(lengths):
        raise ValueError("row counts and sequences disagree")
    if token_stream_root(leaves) != index.get("stream_root"):
        raise ValueError("token stream root does not match the index")
    return sequences, leaves, index
