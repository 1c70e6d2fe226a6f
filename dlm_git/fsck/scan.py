"""One pass of `dlm-git fsck` over the caches: the stat record it trusts and keeps, the
findings and counts it collects, and how it reads a cache file.

Invariants:
- Only names built from checked md5s, or listed from a cache's own directories, are
  opened, without blocking and with `O_NOFOLLOW` (`dlm_git.statcache.read_stamped` over
  `dlm_git.fsutil.open_regular`): a symbolic link, FIFO or device where a cache file
  should be is `Unreadable` (a corrupted finding), never followed and never waited on.
- An unchanged file is not re-read: the stat record (`dlm_git.statcache`, `fsck-record.json`
  in the work tree's state directory) vouches for what a previous run verified while the
  file's stat, taken from its directory entry without following a link, is unchanged and
  the file is not racily clean. `--full` trusts nothing from it, yet writes it again.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from dlm_git.fsck.report import Finding, display_path
from dlm_git.fsutil import NotRegularFile
from dlm_git.statcache import Stamp, Stamped, StatRecord, digest_stamped, read_stamped, stamp_of
from dlm_git.statedir import state_path

RECORD_NAME = "fsck-record.json"
RECORD_FORMAT = "dlm-git/fsck-record/v2"
"""v2: each stamp also holds the file's device (v1 records are ignored and rewritten)."""


def stat_record(root: Path, full: bool) -> StatRecord:
    """The work tree's record of verified cache files (trusting nothing with `full`)."""
    return StatRecord(state_path(root, RECORD_NAME), RECORD_FORMAT, enabled=not full)


@dataclass
class Pass:
    """What one check of the caches found, read and trusted."""

    root: Path
    record: StatRecord
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hashed: int = 0
    unchanged: int = 0

    def display(self, path: Path) -> str:
        return display_path(path, self.root)


class Unreadable(Exception):
    """A cache file that is not a regular file or cannot be read."""


def read_bytes(path: Path) -> tuple[Stamped, bytes]:
    """The bytes of a cache file and its stamp (`Unreadable` if it is not a readable
    regular file)."""
    try:
        return read_stamped(path, follow_symlinks=False)
    except NotRegularFile as exc:
        raise Unreadable(exc.message) from None
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror})") from None


def read_md5(path: Path) -> tuple[Stamped, str]:
    """The md5 hex of a cache file, streamed, and its stamp (see `read_bytes`)."""
    try:
        return digest_stamped(path, "md5", follow_symlinks=False)
    except NotRegularFile as exc:
        raise Unreadable(exc.message) from None
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror})") from None


def regular_stamp(entry: os.DirEntry[str]) -> Stamp | None:
    """The stamp of a directory entry that is a regular file (None for anything else)."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return stamp_of(st) if stat.S_ISREG(st.st_mode) else None
