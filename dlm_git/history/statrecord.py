"""What `fsck` has verified, keyed by each file's stat, so an unchanged cache is re-checked
with about one `stat` per object instead of re-hashing it.

Invariants:
- An entry is `path -> (size, mtime_ns, ctime_ns, inode, digest)`: the file's stat when it
  was verified and the digest it was verified to have (`md5:<hex>` for a DVC object,
  `blake3:<hex>` for a token-cache file). It is trusted only while all four stat fields
  are unchanged, the same test git uses for its index; `ctime` cannot be set by a user,
  so rewriting a file and restoring its size and mtime still invalidates the entry.
- Racily clean files are never recorded: a file whose ctime is less than `RACY_NS` before
  the moment it was stat'ed may still change within the same timestamp tick without its
  stat changing, so it is re-hashed next time (as git re-checks racily clean entries).
- Only what this run verified as good is kept (entries of files gone, changed or found
  bad are dropped), so the record never outgrows the caches it describes.
- Machine-local JSON, `fsck-record.json` in the work tree's state directory inside the
  git directory (`dlm_git.statedir`: no commit can reach or link it), written atomically
  and only when it changed; a damaged record, or a damaged entry, is ignored (everything
  it would have vouched for is re-hashed) and rewritten.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from dlm_git.fsutil import NotRegularFile, atomic_write_bytes, read_regular
from dlm_git.statedir import state_path

RECORD_NAME = "fsck-record.json"
FORMAT = "dlm-git/fsck-record/v1"
RACY_NS = 1_000_000_000
MAX_RECORD_BYTES = 1 << 30

Stamp = tuple[int, int, int, int]
"""(size, mtime_ns, ctime_ns, inode)."""


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def record_path(repo_root: Path) -> Path:
    return state_path(repo_root, RECORD_NAME)


class StatRecord:
    """The record of one run: read at the start, `verified` asked per file, `keep` told
    what this run verified, `save`d at the end. `enabled=False` (`fsck --full`) trusts
    nothing from the old record, yet still writes the new one."""

    def __init__(self, path: Path, enabled: bool = True) -> None:
        self.path = path
        self.old: dict[str, tuple[Stamp, str]] = {}
        self.new: dict[str, tuple[Stamp, str]] = {}
        self.damaged = False
        if enabled:
            self.old = self._load()

    def _load(self) -> dict[str, tuple[Stamp, str]]:
        try:
            data = read_regular(self.path, MAX_RECORD_BYTES, follow_symlinks=False)
        except NotRegularFile:  # a FIFO or a link in its place: replaced by the next save
            self.damaged = True
            return {}
        except OSError:
            return {}
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):
            self.damaged = True
            return {}
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            self.damaged = True
            return {}
        entries = obj.get("entries")
        if not isinstance(entries, dict):
            self.damaged = True
            return {}
        loaded: dict[str, tuple[Stamp, str]] = {}
        for key, value in entries.items():
            if (
                isinstance(value, list)
                and len(value) == 5
                and all(type(v) is int for v in value[:4])
                and isinstance(value[4], str)
            ):
                size, mtime, ctime, ino = value[:4]
                loaded[key] = ((size, mtime, ctime, ino), value[4])
            else:
                self.damaged = True
        return loaded

    def verified(self, key: str, stamp: Stamp) -> str | None:
        """The digest `key` was verified to have, if its stat is still `stamp`."""
        entry = self.old.get(key)
        if entry is None or entry[0] != stamp:
            return None
        return entry[1]

    def keep(self, key: str, stamp: Stamp, digest: str, seen_ns: int | None = None) -> None:
        """Record that `key`, at `stamp`, was verified to have `digest`; unless it is racily
        clean (its ctime within `RACY_NS` of `seen_ns`, when it was stat'ed)."""
        seen = time.time_ns() if seen_ns is None else seen_ns
        if stamp[2] >= seen - RACY_NS:
            return
        self.new[key] = (stamp, digest)

    def carry(self, key: str, stamp: Stamp) -> None:
        """Keep the old entry of `key` (trusted for `stamp` this run) in the new record."""
        entry = self.old.get(key)
        if entry is not None and entry[0] == stamp:
            self.new[key] = entry

    def save(self) -> str | None:
        """Write the new record if it differs from the old one; None, or why it could not
        be written (the next run then re-hashes; nothing else depends on it)."""
        exists = self.path.exists()
        if self.new == self.old and not self.damaged and (exists or not self.new):
            return None
        entries = {k: [*stamp, digest] for k, (stamp, digest) in sorted(self.new.items())}
        data = json.dumps({"format": FORMAT, "entries": entries}, separators=(",", ":"))
        try:
            atomic_write_bytes(self.path, data.encode("utf-8"), sync_dir=False)
        except OSError as exc:
            return f"{self.path}: not written ({exc.strerror or type(exc).__name__})"
        return None
