"""A stat-keyed cache of file hashes, so hooks don't re-hash unchanged adapter bytes.

Invariants:
- Key: absolute path; an entry is trusted by `dlm_git.statcache`'s one rule (its stat
  unchanged, the file not racily clean), so a file rewritten within the timestamp tick
  of its hashing is hashed again, never answered from the cache.
- Stored as `hash-cache.json` in the work tree's state directory inside the git
  directory (`dlm_git.statedir`: machine-local, out of every commit's reach), found on
  first use so a hook that hashes nothing spends no process on it; entries of files this
  run did not hash are kept (a commit touches few documents); a damaged cache file is
  ignored and rewritten.
- Files are read through `dlm_git.fsutil` (a FIFO or device is one line naming it, never
  a hang), and the stat recorded is the one of the descriptor that was hashed.
"""

from __future__ import annotations

import os
from pathlib import Path

from dlm_git.statcache import StatRecord, digest_stamped, stamp_of
from dlm_git.statedir import state_path

CACHE_NAME = "hash-cache.json"
FORMAT = "dlm-git/hash-cache/v2"
"""v1 was a bare `{path: [size, mtime, ctime, inode, sha256]}` (no device, no race guard)."""
PREFIX = "sha256:"


class HashCache:
    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root
        self._record: StatRecord | None = None

    @property
    def record(self) -> StatRecord:
        if self._record is None:
            path = state_path(self.root, CACHE_NAME)
            self._record = StatRecord(path, FORMAT, prune=False)
        return self._record

    def sha256(self, path: Path) -> str:
        """The file's sha256 hex: from the record while it vouches for the file's stat,
        else read (and recorded unless racily clean)."""
        key = str(Path(path).resolve())
        known = self.record.verified(key, stamp_of(os.stat(path)))
        if known is not None and known.startswith(PREFIX):
            return known.removeprefix(PREFIX)
        stamped, digest = digest_stamped(path, "sha256", follow_symlinks=True)
        if stamped.stamp is not None:
            self.record.keep(key, stamped.stamp, PREFIX + digest, stamped.seen_ns)
        return digest

    def save(self) -> None:
        if self._record is not None:
            self._record.save()
