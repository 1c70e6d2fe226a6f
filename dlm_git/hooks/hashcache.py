"""A stat-keyed cache of file hashes, so hooks don't re-hash unchanged adapter bytes.

Key: absolute path; valid while (size, mtime_ns, ctime_ns, inode) are unchanged, the same
test git uses for its index. Stored as `hash-cache.json` in the work tree's state
directory inside the git directory (`dlm_git.statedir`: machine-local, out of every
commit's reach), found on first use so a hook that hashes nothing spends no process on
it; a damaged cache file is ignored and rewritten. Files are read through
`dlm_git.fsutil` (a FIFO or device is one line naming it, never a hang).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from dlm_git.fsutil import (
    MAX_RECORD_BYTES,
    NotRegularFile,
    atomic_write_bytes,
    digest_regular,
    read_regular,
)
from dlm_git.safeparse import load_json
from dlm_git.statedir import state_path

CACHE_NAME = "hash-cache.json"


class HashCache:
    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root
        self._path: Path | None = None
        self._entries: dict[str, list[object]] | None = None
        self.dirty = False

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = state_path(self.root, CACHE_NAME)
        return self._path

    @property
    def entries(self) -> dict[str, list[object]]:
        if self._entries is None:
            self._entries = {}
            try:
                data = load_json(read_regular(self.path, MAX_RECORD_BYTES, follow_symlinks=False))
            except (OSError, ValueError, NotRegularFile):
                data = None
            if isinstance(data, dict):
                self._entries = data
        return self._entries

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
        digest = digest_regular(path, "sha256")
        self.entries[key] = [*stamp, digest]
        self.dirty = True
        return digest

    def save(self) -> None:
        if self.dirty:
            data = json.dumps(self.entries, sort_keys=True).encode()
            with contextlib.suppress(OSError):
                atomic_write_bytes(self.path, data)
