"""Atomic file writes: a reader sees the old file or the new one, never a partial one.

Every write dlm-git makes to a file a user or git can see goes through here:
unique tmp name in the same directory, fsync, `os.replace`, fsync of the directory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

FILE_MODE = 0o644
DIR_MODE = 0o755


def atomic_write_bytes(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Write `data` to `path` atomically. `sync_dir=False` skips making the rename itself
    durable (for caches, where losing a just-written entry on power loss is harmless)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # lazy: the git hooks import this module

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def fsync_dir(directory: Path) -> None:
    """Make a rename inside `directory` durable (no-op where directories cannot be opened)."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


@contextlib.contextmanager
def replacing_dir(dest: Path) -> Iterator[Path]:
    """A fresh directory beside `dest` to fill. When the block succeeds it replaces `dest`
    by rename (any old `dest` removed first) and the rename is made durable; when it
    fails the directory is removed and `dest` is untouched."""
    import shutil
    import tempfile

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        yield tmp
        os.chmod(tmp, DIR_MODE)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(dest.parent)
