"""The `manifest.json` schema (version 1).

Invariant: like the lock, a manifest is a pure function of the inputs and outputs it
binds: no timestamps, no absolute paths; floats that matter are recorded as exact hex.
It is written only after the adapter is completely written.
"""

from __future__ import annotations

from typing import Any, Literal

from dlm_git.hashing import canonical_json, sha256_bytes
from dlm_git.validated import Record

MANIFEST_VERSION = 1


class _Frozen(Record):
    """The records of a manifest (`dlm_git.validated`: frozen, unknown keys refused)."""


class SourceEntry(_Frozen):
    relpath: str
    sha256: str
    size: int


class SourcesRecord(_Frozen):
    files: list[SourceEntry]
    merkle_root: str


class TokensRecord(_Frozen):
    root: str
    rows: int
    sequences: int
    tokens: int


class BaseRecord(_Frozen):
    spec: str
    kind: str
    revision: str | None
    tensor_root: str
    tokenizer_sha256: str
    config_sha256: str | None = None
    """sha256 of the base's `config.json` (absent in manifests written before it was)."""


class AdapterFile(_Frozen):
    sha256: str
    size: int


class TensorEntry(_Frozen):
    name: str
    dtype: str
    shape: list[int]
    digest: str


class AdapterRecord(_Frozen):
    files: dict[str, AdapterFile]
    tensor_root: str
    tensors: list[TensorEntry]


class TrainingResult(_Frozen):
    steps: int
    final_loss_hex: str
    tokens_trained: int
    skipped_preference_sections: int


class SegmentsRecord(_Frozen):
    every: int
    count: int
    chain_root: str


class Manifest(_Frozen):
    schema_version: Literal[1] = 1
    dlm_id: str
    dlm_sha256: str
    section_ids: list[str]
    sources: SourcesRecord
    tokens: TokensRecord
    tokenizer_sha256: str
    base: BaseRecord
    training_config: dict[str, Any]
    config_sha256: str
    lock_sha256: str
    adapter: AdapterRecord
    training: TrainingResult
    segments: SegmentsRecord | None = None

    def to_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return sha256_bytes(self.to_bytes())
