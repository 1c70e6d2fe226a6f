"""A stat-keyed cache of file hashes, so hooks don't re-hash unchanged adapter bytes.

Key: absolute path; valid while (size, mtime_ns, ctime_ns, inode) are unchanged, the same
test git uses for its index. Stored in `.dlm-git/hash-cache.json` (machine-local, never
committed); a damaged cache file is ignored and rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from dlm_git.fsutil import atomic_write_bytes

CACHE_NAME = "hash-cache.json"


class HashCache:
    def __init__(self, repo_root: Path) -> None:
        self.path = repo_root / ".dlm-git" / CACHE_NAME
        self.entries: dict[str, list[object]] = {}
        self.dirty = False
        try:
            data = json.loads(self.path.read_text("utf-8"))
            if isinstance(data, dict):
                self.entries = data
        except (OSError, ValueError, RecursionError):
            pass

    def sha256(self, path: Path) -> str:
        st = os.stat(path)
        key = str(Path(path).resolve())
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        entry = self.entries.get(key)
        if (
            isinstance(entry, list)
            and len(entry) == 5
            and entry[:4] == stamp
            and isinstance(entry[4], str)
        ):
            return entry[4]
        with open(path, "rb") as fh:
            digest = hashlib.file_digest(fh, "sha256").hexdigest()
        self.entries[key] = [*stamp, digest]
        self.dirty = True
        return digest

    def save(self) -> None:
        if self.dirty:
            with contextlib.suppress(OSError):
                atomic_write_bytes(self.path, json.dumps(self.entries, sort_keys=True).encode())
