"""Atomic file writes, and reads that cannot block.

Invariants:
- Writes: a reader sees the old file or the new one, never a partial one. Every write
  dlm-git makes to a file a user or git can see goes through here: unique tmp name in
  the same directory, fsync, `os.replace`, fsync of the directory.
- Reads: every file dlm-git reads from a cache (DVC's, the token cache), from a commit's
  checkout or from a configured path (signing and trusted keys) is opened here
  (`open_regular`, `read_regular`, `digest_regular`, `copy_regular`): non-blocking, so a
  FIFO cannot hang the open, then checked on the open descriptor (`fstat`) to be a regular
  file, of at most `limit` bytes where one is given, before a byte is read. Anything else
  (a FIFO, a device, a socket, a directory, a symbolic link where links are not
  followed, a file over its limit) is `NotRegularFile`: one line naming the path. The
  check is on the descriptor that is then read, so nothing can be swapped in between.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from dlm_git.errors import DlmGitError, UsageError

FILE_MODE = 0o644
DIR_MODE = 0o755
MAX_RECORD_BYTES = 1 << 28
"""The most dlm-git reads whole of a JSON or YAML record (manifest, lock, caches' indexes)."""
REGULAR_HINT = "replace it with the regular file it should be (dlm-git reads no FIFO or device)"
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotRegularFile(DlmGitError):
    """A path dlm-git must read is not a regular file of bounded size."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    follow_symlinks: bool = True,
    hint: str = REGULAR_HINT,
) -> io.FileIO:
    """`path` opened for reading (unbuffered) once it is known to be a regular file of at
    most `limit` bytes. Opened with `O_NONBLOCK` (a FIFO's open returns at once) and
    checked with `fstat` on that descriptor; `follow_symlinks=False` refuses a symbolic
    link as the last component. `NotRegularFile` for anything else; `OSError` (no such
    file, permission) as the open raised it."""
    nofollow = 0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | nofollow
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            what = "is a symbolic link, not a regular file"
        elif exc.errno == errno.ENXIO:  # a socket, or a device with nothing behind it
            what = "is not a regular file"
        else:
            raise
        raise NotRegularFile(str(path), what, hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(str(path), f"is {_kind(st.st_mode)}, not a regular file", hint)
        if limit is not None and st.st_size > limit:
            raise NotRegularFile(str(path), _over(st.st_size, limit), hint)
        os.set_blocking(fd, True)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def _over(size: int | None, limit: int) -> str:
    what = f"is {size} bytes" if size is not None else "grew while it was read"
    return f"{what}, over the {limit}-byte limit for this file"


def read_regular(
    path: str | os.PathLike[str],
    limit: int,
    *,
    follow_symlinks: bool = True,
    hint: str = REGULAR_HINT,
) -> bytes:
    """The bytes of the regular file `path` (see `open_regular`), at most `limit` of them:
    a file over the limit, or one that grows past it while read, is `NotRegularFile`."""
    with open_regular(path, limit=limit, follow_symlinks=follow_symlinks, hint=hint) as fh:
        size = os.fstat(fh.fileno()).st_size
        chunks = [fh.read(min(size, limit) + 1) or b""]
        total = len(chunks[0])
        while total <= limit:  # the file grew since fstat: read on, one past the limit
            more = fh.read(min(limit + 1 - total, 1 << 20)) or b""
            if not more:
                break
            chunks.append(more)
            total += len(more)
    if total > limit:
        raise NotRegularFile(str(path), _over(None, limit), hint)
    return b"".join(chunks)


def digest_regular(
    path: str | os.PathLike[str],
    algorithm: str,
    *,
    follow_symlinks: bool = True,
    hint: str = REGULAR_HINT,
) -> str:
    """Hex `hashlib` digest (`algorithm`: "sha256", "md5") of the regular file `path`,
    streamed (no size limit: a regular file ends)."""
    with open_regular(path, follow_symlinks=follow_symlinks, hint=hint) as fh:
        return hashlib.file_digest(fh, algorithm).hexdigest()


def copy_regular(
    src: str | os.PathLike[str],
    dest: Path,
    *,
    follow_symlinks: bool = True,
    hint: str = REGULAR_HINT,
) -> None:
    """Copy the regular file `src` (see `open_regular`) to a new file `dest`, streamed."""
    import shutil  # lazy: the git hooks import this module

    with (
        open_regular(src, follow_symlinks=follow_symlinks, hint=hint) as fh,
        open(dest, "wb") as out,
    ):
        shutil.copyfileobj(fh, out, 1 << 20)


def atomic_write_bytes(
    path: Path, data: bytes, *, sync_dir: bool = True, sync: bool = True
) -> None:
    """Write `data` to `path` atomically. `sync_dir=False` skips making the rename itself
    durable (for caches, where losing a just-written entry on power loss is harmless);
    `sync=False` skips making the bytes durable as well (for a memory that reads a torn
    file as none: after a power loss it may hold nothing, never another file's bytes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # lazy: the git hooks import this module

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if sync:
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


@contextlib.contextmanager
def given_file(path: str | os.PathLike[str], hint: str) -> Iterator[None]:
    """Reads of a file the user named on the command line: one that is no regular file or
    cannot be read is a `UsageError` (exit 2) naming it, with `hint`."""
    try:
        yield
    except NotRegularFile as exc:
        raise UsageError(exc.subject, exc.message, hint) from None
    except OSError as exc:
        raise UsageError(str(path), exc.strerror or "cannot be read", hint) from None


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
