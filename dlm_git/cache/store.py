"""The token cache's entries: reading and writing entry files and packs.

Invariants:
- An entry is addressed by `key(row_id, tokenizer_sha256, sequence_len)`
  (`entry.entry_key`); any of the three changing gives another key, so a stale entry can
  never be returned. Where its file lives is `dlm_git.cache.layout`'s to say.
- Entry files and packs are written with a unique tmp name, fsync and `os.replace`, so
  readers never see a partial one; a reader needs no lock.
- Cache failures are never fatal and never change results: a missing, truncated or
  corrupted entry or pack is a miss (counted in `corrupt` when it fails to decode) and
  gets rewritten; a file of another format version is a plain miss; a link, FIFO or device
  in a file's place is a miss, never followed or waited on.
- What a run used and wrote is logged in the index (`dlm_git.cache.index`) by
  `record_run`, which also bounds the cache.
- A pack is read whole into memory of its own (`read_large`), its bytes exactly the
  file's, read-only: anonymous memory asked for in huge pages where the system has them,
  since a fresh buffer of a hundred megabytes otherwise costs a page fault (and a page
  zeroed) every 4 KiB, more than the read itself. It is freed with the last array that
  views it. Never a mapping of the file: a file truncated under a mapping kills the reader.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from dlm_git.cache.index import Index, RunMetrics
from dlm_git.cache.layout import CacheLayout
from dlm_git.fsutil import NotRegularFile, atomic_write_bytes, open_regular

if TYPE_CHECKING:  # entries decode to numpy arrays: imported where entries are read, so
    # `cache show|prune|clear` and `dlm-git show` work on a core install (no numpy)
    from dlm_git.cache.pack import Pack
    from dlm_git.token_stream import RowTokens

T = TypeVar("T")
B = TypeVar("B")
LARGE_READ = 4 * 1024 * 1024
"""Bytes from which a file is read into memory of its own (`read_large`): above a huge
page's 2 MiB, where page faults start to cost more than the copy."""


def read_small(fh: io.FileIO) -> bytes:
    """The rest of the file, as `bytes`."""
    return fh.read() or b""


def read_large(fh: io.FileIO) -> bytes | memoryview:
    """The rest of the file (opened at its start), a read-only view of memory of its own
    (see the invariants) when it holds at least `LARGE_READ` bytes, else `bytes`. A file
    whose size changes while it is read is read again as `read_small` reads it."""
    size = os.fstat(fh.fileno()).st_size
    if size < LARGE_READ:
        return read_small(fh)
    buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with contextlib.suppress(AttributeError, OSError):  # no huge pages here: plain pages
        buf.madvise(mmap.MADV_HUGEPAGE)
    got = 0
    with memoryview(buf) as view:
        while got < size and (n := fh.readinto(view[got:])):
            got += n
    if got < size or fh.read(1):
        fh.seek(0)
        return read_small(fh)
    return memoryview(buf).toreadonly()


class TokenCache:
    def __init__(self, root: Path) -> None:
        self.layout = CacheLayout(root)
        self.index = Index(self.layout)
        self.root = self.layout.root
        self.corrupt = 0

    def get(self, key: str, row_id: str) -> RowTokens | None:
        """The row's tokens from its entry file; None on a miss (absent or corrupt)."""
        from dlm_git.cache.entry import decode_entry

        path = self.layout.entry_path(key)
        return self._load(path, read_small, lambda data: decode_entry(data, key, row_id))

    def read_pack(self, dlm_id: str) -> Pack | None:
        """The document's pack (see pack.py); None if there is none, it is corrupt
        (counted), or it is another version's (written by another dlm-git: not corrupt,
        just rewritten)."""
        from dlm_git.cache.pack import decode_pack, is_other_pack_version

        def decode(data: bytes | memoryview) -> Pack | None:
            return None if is_other_pack_version(data) else decode_pack(data)

        return self._load(self.layout.pack_path(dlm_id), read_large, decode)

    def _load(
        self,
        path: str | Path,
        read: Callable[[io.FileIO], B],
        decode: Callable[[B], T | None],
    ) -> T | None:
        """`decode` of the file's bytes as `read` reads them; None if it cannot be read or
        is corrupt (counted)."""
        from dlm_git.cache.entry import CorruptEntry

        try:
            with open_regular(path, follow_symlinks=False) as fh:
                data = read(fh)
        except (OSError, NotRegularFile):  # absent, unreadable, or a FIFO or link: a miss
            return None
        try:
            return decode(data)
        except CorruptEntry:
            self.corrupt += 1
            return None

    def write_pack(self, dlm_id: str, data: bytes) -> int:
        """Write the document's pack (`encode_pack`) atomically; returns its size (0 if the
        write failed)."""
        try:
            atomic_write_bytes(self.layout.pack_path(dlm_id), data)
        except OSError:
            return 0
        return len(data)

    def put(self, key: str, data: bytes) -> int:
        """Write an encoded entry atomically; returns its size (0 if the write failed)."""
        try:
            atomic_write_bytes(self.layout.path_of(key), data, sync_dir=False)
        except OSError:
            return 0
        return len(data)

    def record_run(
        self,
        used: Collection[str],
        written: dict[str, int],
        max_bytes: int,
        metrics: dict[str, object],
        *,
        served_by: str | None = None,
    ) -> RunMetrics:
        """Log this run in the index with the corrupt files it met (`Index.record_run`)."""
        return self.index.record_run(
            used, written, max_bytes, metrics, corrupt=self.corrupt, served_by=served_by
        )
