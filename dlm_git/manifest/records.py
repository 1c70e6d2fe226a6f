"""Compute the hash records a manifest holds (shared by train, the hooks and verify).

Invariants:
- The sources Merkle root's leaf for a file is
  `relpath (UTF-8) || 0x00 || sha256 (32 raw bytes) || u64le(size)`, in sorted relpath
  order as expanded; an empty source list has the root of the empty tree.
- The adapter record covers every file in `adapter/` (sha256 + size) and every tensor of
  `adapter_model.safetensors` (name, dtype, shape, digest) plus their tensor root.
- Manifest bytes are hostile until parsed here, through `safeparse` (nesting bounded),
  and validated against the schema; a manifest that fails is a `DlmGitError` naming it.
- No module here imports torch: the git hooks use it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from dlm_git.hashing import digest_safetensors, sha256_file
from dlm_git.layout import ADAPTER_WEIGHTS
from dlm_git.manifest.schema import (
    AdapterFile,
    AdapterRecord,
    Manifest,
    SourceEntry,
    SourcesRecord,
    TensorEntry,
)
from dlm_git.merkle import merkle_root
from dlm_git.safeparse import load_json


def source_leaf(relpath: str, sha256: str, size: int) -> bytes:
    return relpath.encode("utf-8") + b"\x00" + bytes.fromhex(sha256) + struct.pack("<Q", size)


def sources_record(entries: Iterable[tuple[str, str, int]]) -> SourcesRecord:
    files = [SourceEntry(relpath=r, sha256=s, size=n) for r, s, n in entries]
    root = merkle_root([source_leaf(f.relpath, f.sha256, f.size) for f in files])
    return SourcesRecord(files=files, merkle_root=root)


def adapter_record(adapter_dir: Path) -> AdapterRecord:
    files: dict[str, AdapterFile] = {}
    tensors: list[TensorEntry] = []
    tensor_root = ""
    for path in sorted(p for p in adapter_dir.iterdir()):
        if path.is_dir():
            raise ValueError(f"{path}: unexpected directory inside the adapter")
        if path.name == ADAPTER_WEIGHTS:
            digest = digest_safetensors(path)
            files[path.name] = AdapterFile(sha256=digest.file_sha256, size=digest.size)
            tensor_root = digest.tensor_root
            tensors = [
                TensorEntry(name=t.name, dtype=t.dtype, shape=list(t.shape), digest=t.digest)
                for t in digest.tensors
            ]
        else:
            files[path.name] = AdapterFile(sha256=sha256_file(path), size=path.stat().st_size)
    if ADAPTER_WEIGHTS not in files:
        raise ValueError(f"{adapter_dir}: no {ADAPTER_WEIGHTS}")
    return AdapterRecord(files=files, tensor_root=tensor_root, tensors=tensors)


def read_manifest_bytes(data: bytes, subject: str) -> Manifest:
    from dlm_git.errors import DlmGitError
    from dlm_git.validated import ValidationError

    try:
        obj = load_json(data.decode("utf-8"))
    except ValueError:  # not UTF-8, not JSON, nested too deeply
        raise DlmGitError(subject, "manifest is not valid JSON", "re-run training") from None
    try:
        return Manifest.model_validate(obj)
    except ValidationError as exc:
        first = exc.problems[0]
        key = ".".join(str(p) for p in first.loc)
        raise DlmGitError(
            subject, f"manifest field '{key}': {first.message}", "re-run training"
        ) from None
