"""A stat-keyed record of base weight files' tensor digests: retraining on an unchanged
base costs a `stat` per weight file instead of re-hashing its gigabytes.

Invariants:
- An entry is used only while its file's (size, mtime_ns, ctime_ns, inode) are what they
  were when it was hashed: the test git uses for its index. Any write to the file changes
  its ctime, so a changed base is always re-hashed.
- The record is machine-local (beside the base cache: `DLM_GIT_BASE_CACHE`), never
  committed and never read from a commit. Anything unreadable or malformed in it is
  ignored and rewritten; writes are atomic; at most MAX_ENTRIES files are remembered.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, atomic_write_bytes, read_regular
from dlm_git.hashing import TensorDigest, digest_safetensors
from dlm_git.safeparse import load_json

RECORD_NAME = "tensor-digests.json"
MAX_ENTRIES = 256


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _tensor(row: Any) -> TensorDigest | None:
    if not (isinstance(row, list) and len(row) == 5):
        return None
    name, dtype, shape, nbytes, digest = row
    ok = (
        isinstance(name, str)
        and isinstance(dtype, str)
        and isinstance(shape, list)
        and all(isinstance(n, int) for n in shape)
        and isinstance(nbytes, int)
        and isinstance(digest, str)
    )
    return TensorDigest(name, dtype, tuple(shape), nbytes, digest) if ok else None


class DigestRecord:
    def __init__(self, root: Path) -> None:
        self.path = Path(root) / RECORD_NAME
        self.entries: dict[str, Any] = {}
        self.dirty = False
        with contextlib.suppress(OSError, ValueError, NotRegularFile):
            data = load_json(read_regular(self.path, MAX_RECORD_BYTES), text_only=False)
            if isinstance(data, dict):
                self.entries = data

    def tensors(self, path: Path) -> list[TensorDigest]:
        """The tensor digests of the safetensors file at `path` (hashed if not recorded)."""
        real = os.path.realpath(path)
        stamp = _stamp(os.stat(real))
        entry = self.entries.get(real)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == stamp:
            rows = [_tensor(r) for r in entry[1]] if isinstance(entry[1], list) else [None]
            if all(r is not None for r in rows):
                return [r for r in rows if r is not None]
        digests = list(digest_safetensors(Path(real)).tensors)
        if _stamp(os.stat(real)) == stamp:  # not changed while it was read
            self.entries.pop(real, None)
            self.entries[real] = [
                stamp,
                [[d.name, d.dtype, list(d.shape), d.nbytes, d.digest] for d in digests],
            ]
            self.dirty = True
        return digests

    def save(self) -> None:
        if not self.dirty:
            return
        keep = dict(list(self.entries.items())[-MAX_ENTRIES:])
        with contextlib.suppress(OSError):
            atomic_write_bytes(self.path, json.dumps(keep, sort_keys=False).encode("utf-8"))
