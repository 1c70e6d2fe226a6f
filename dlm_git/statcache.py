"""Stat-keyed records of what files were verified to hold: the one rule for every cache
that skips reading a file because its stat is unchanged (fsck's record of verified cache
objects, the pre-commit hook's adapter hashes).

Invariants:
- An entry is `key -> (stamp, digest)`: `stamp` (`Stamp`: size, mtime, ctime, inode,
  device) is the file's stat when it was read, `digest` what it was found to hold. It is
  trusted only while all five are unchanged, the test git uses for its index; `ctime`
  cannot be set by a user, so rewriting a file and restoring its size and mtime still
  invalidates the entry.
- Racily clean (`racily_clean`): a file whose ctime is less than `RACY_NS` before a
  moment may change again within the same timestamp tick without its stat changing. An
  entry is never recorded racily clean against the moment its file was stat'ed (`keep`),
  and never trusted racily clean against the moment the record was written (as git
  compares an index entry's mtime with the index file's): such a file is read again.
- A stat is taken on the descriptor that is read (`read_stamped`, `digest_stamped`); a
  file whose stat changed while it was read is checked, never recorded.
- What a record keeps when saved: with `prune`, only what this run verified or carried
  (fsck: the record never outgrows the caches it describes); without, every entry of the
  old record that is still trustworthy too (the hook: a commit touches a few documents of
  many, the others keep theirs).
- Machine-local JSON, `{"format": ..., "entries": {key: [*stamp, digest]}}`, kept in the
  state directory (`dlm_git.statedir`, chosen by the caller), read through `fsutil`
  (a FIFO or link in its place is damage, never a hang) and `safeparse`, written
  atomically and only when it changed. A damaged record or entry is ignored (what it
  would have vouched for is read again) and rewritten; one of an older version of the
  same format is ignored and rewritten without being called damaged.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import NamedTuple

from dlm_git.fsutil import NotRegularFile, atomic_write_bytes, open_regular, read_regular
from dlm_git.safeparse import load_json

RACY_NS = 1_000_000_000
"""Coarser than any timestamp tick a cache's file system is expected to have."""
MAX_RECORD_BYTES = 1 << 30


class Stamp(NamedTuple):
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int


def stamp_of(st: os.stat_result) -> Stamp:
    return Stamp(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def racily_clean(stamp: Stamp, moment_ns: int) -> bool:
    """Whether the file of `stamp` could still change within its ctime's tick after
    `moment_ns` without its stamp changing."""
    return stamp.ctime_ns >= moment_ns - RACY_NS


class Stamped(NamedTuple):
    stamp: Stamp | None
    """The file's stat while it was read; None when it changed meanwhile."""
    seen_ns: int
    """When it was stat'ed (before the read): the moment `keep` judges raciness by."""


def read_stamped(path: str | os.PathLike[str], *, follow_symlinks: bool) -> tuple[Stamped, bytes]:
    """The bytes of the regular file `path` (`fsutil.open_regular`: `NotRegularFile`,
    `OSError`) with its stat taken on the open descriptor."""
    with open_regular(path, follow_symlinks=follow_symlinks) as fh:
        seen, before = time.time_ns(), os.fstat(fh.fileno())
        data = fh.read() or b""
        return _stamped(before, os.fstat(fh.fileno()), seen), data


def digest_stamped(
    path: str | os.PathLike[str], algorithm: str, *, follow_symlinks: bool
) -> tuple[Stamped, str]:
    """The hex `hashlib` digest of the regular file `path`, streamed, with its stat taken
    on the open descriptor (see `read_stamped`)."""
    with open_regular(path, follow_symlinks=follow_symlinks) as fh:
        seen, before = time.time_ns(), os.fstat(fh.fileno())
        digest = hashlib.file_digest(fh, algorithm).hexdigest()
        return _stamped(before, os.fstat(fh.fileno()), seen), digest


def _stamped(before: os.stat_result, after: os.stat_result, seen: int) -> Stamped:
    stamp = stamp_of(before)
    return Stamped(stamp if stamp == stamp_of(after) else None, seen)


class StatRecord:
    """One run's record: loaded at the start, asked `verified` per file, told `keep` what
    this run verified, `save`d at the end. `enabled=False` (`fsck --full`) trusts nothing
    from the old record, yet still writes the new one."""

    def __init__(self, path: Path, fmt: str, *, enabled: bool = True, prune: bool = True) -> None:
        self.path = path
        self.format = fmt
        self.prune = prune
        self.old: dict[str, tuple[Stamp, str]] = {}
        self.new: dict[str, tuple[Stamp, str]] = {}
        self.damaged = False
        if enabled:
            self.old = self._load()
        if not prune:
            self.new = dict(self.old)

    def _load(self) -> dict[str, tuple[Stamp, str]]:
        try:
            data = read_regular(self.path, MAX_RECORD_BYTES, follow_symlinks=False)
            written = os.stat(self.path, follow_symlinks=False).st_mtime_ns
        except NotRegularFile:  # a FIFO or a link in its place: replaced by the next save
            self.damaged = True
            return {}
        except OSError:
            return {}
        entries = self._entries(data)
        loaded: dict[str, tuple[Stamp, str]] = {}
        for key, value in (entries or {}).items():
            entry = _entry(value)
            if entry is None:
                self.damaged = True
            elif not racily_clean(entry[0], written):
                loaded[key] = entry
        return loaded

    def _entries(self, data: bytes) -> dict[str, object] | None:
        """The record's entries; None (damaged unless an older version) if it has none."""
        try:
            obj = load_json(data, text_only=False)  # keys: paths as the OS names them
        except ValueError:
            obj = None
        found = obj.get("format") if isinstance(obj, dict) else None
        entries = obj.get("entries") if isinstance(obj, dict) else None
        if found == self.format and isinstance(entries, dict):
            return entries
        family = self.format.rpartition("/")[0] + "/"
        older = isinstance(found, str) and found.startswith(family) and found != self.format
        self.damaged = self.damaged or not older
        return None

    def verified(self, key: str, stamp: Stamp) -> str | None:
        """The digest `key` was verified to have, if its stat is still `stamp`."""
        entry = self.old.get(key)
        if entry is None or entry[0] != stamp:
            return None
        return entry[1]

    def keep(self, key: str, stamp: Stamp, digest: str, seen_ns: int | None = None) -> None:
        """Record that `key`, at `stamp`, was verified to have `digest`; unless it is racily
        clean against `seen_ns`, when it was stat'ed (then an old entry of it is dropped)."""
        seen = time.time_ns() if seen_ns is None else seen_ns
        if racily_clean(stamp, seen):
            self.new.pop(key, None)
            return
        self.new[key] = (stamp, digest)

    def carry(self, key: str, stamp: Stamp) -> None:
        """Keep the old entry of `key` (trusted for `stamp` this run) in the new record."""
        entry = self.old.get(key)
        if entry is not None and entry[0] == stamp:
            self.new[key] = entry

    def save(self) -> str | None:
        """Write the new record if it differs from the old one; None, or why it could not
        be written (the next run then reads again; nothing else depends on it)."""
        exists = self.path.exists()
        if self.new == self.old and not self.damaged and (exists or not self.new):
            return None
        entries = {k: [*stamp, digest] for k, (stamp, digest) in sorted(self.new.items())}
        data = json.dumps({"format": self.format, "entries": entries}, separators=(",", ":"))
        try:
            atomic_write_bytes(self.path, data.encode("utf-8"), sync_dir=False)
        except OSError as exc:
            return f"{self.path}: not written ({exc.strerror or type(exc).__name__})"
        return None


def _entry(value: object) -> tuple[Stamp, str] | None:
    """`[size, mtime_ns, ctime_ns, inode, device, digest]` as an entry; None if malformed."""
    if (
        isinstance(value, list)
        and len(value) == len(Stamp._fields) + 1
        and all(type(v) is int for v in value[:-1])
        and isinstance(value[-1], str)
    ):
        return Stamp(*value[:-1]), value[-1]
    return None
