"""Objects read by id through `git cat-file --batch`: blobs, trees and commits.

Invariants:
- Objects are requested by *object id* (40 or 64 hex digits) only, never by
  `<rev>:<path>` name: a name holding a newline or `:0:` cannot split a request or be
  read as another object, so every answer belongs to the id it was asked for. Names are
  turned into ids by a listing first (`listing.object_ids`).
- One parser (`_answers`) reads cat-file's answers, whether they come all at once
  (`read_objects`: one process per call) or streamed (`BlobReader`: one process for
  several rounds). An object of another type than the one asked for reads as None.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

from dlm_git.gitio.listing import object_ids
from dlm_git.gitio.process import GitError, decode, git, is_oid, start_git

BATCH = ["cat-file", "--batch"]


def _batch_request(oids: Sequence[str]) -> bytes:
    for oid in oids:
        if not is_oid(oid):  # only ids ever go on a line
            raise ValueError(f"not an object id: {oid!r}")
    return "".join(oid + "\n" for oid in oids).encode("ascii")


def _answers(stream: IO[bytes], oids: Sequence[str], kind: str) -> dict[str, bytes | None]:
    """cat-file's answers to `oids`, in order, from `stream`: `<id> <type> <size>` then
    the content and a newline, or `<id> missing`. None where missing or not a `kind`."""
    result: dict[str, bytes | None] = {}
    for oid in oids:
        line = stream.readline()
        if not line.endswith(b"\n"):
            raise GitError("git cat-file", "exited early")
        parts = line[:-1].decode("ascii", "replace").split(" ")
        if len(parts) != 3 or parts[0] != oid:
            result[oid] = None  # `<oid> missing`
            continue
        size = int(parts[2])
        data = stream.read(size + 1)[:size]
        result[oid] = data if parts[1] == kind else None
    return result


def read_objects(oids: Iterable[str], cwd: Path, kind: str) -> dict[str, bytes | None]:
    """Contents of objects of type `kind` by id (None where missing or of another type)."""
    oids = list(dict.fromkeys(oids))
    if not oids:
        return {}
    out = git(BATCH, cwd, input=_batch_request(oids))
    return _answers(io.BytesIO(out), oids, kind)


def read_blobs(oids: Iterable[str], cwd: Path) -> dict[str, bytes | None]:
    """Contents of blobs by object id (None where missing or not a blob)."""
    return read_objects(oids, cwd, "blob")


def _read_named(
    names: Iterable[str], cwd: Path, blobs_of: Callable[[Iterable[str]], dict[str, bytes | None]]
) -> dict[str, bytes | None]:
    """Contents of objects named like `:path` or `HEAD:path` (None where missing), their
    ids listed first and their blobs read by `blobs_of`."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    ids = object_ids(names, cwd)
    blobs = blobs_of(ids.values())
    return {name: blobs.get(ids[name]) if name in ids else None for name in names}


def cat_files(names: Iterable[str], cwd: Path) -> dict[str, bytes | None]:
    """Contents of objects named like `:path` or `HEAD:path` (None where missing)."""
    return _read_named(names, cwd, lambda oids: read_blobs(oids, cwd))


def parse_tree(data: bytes, oid_bytes: int = 20) -> list[tuple[str, str, str]]:
    """(mode, name, hex object id) of each entry of a raw tree object (`<mode> <name>NUL`
    then the raw id, `oid_bytes` long: 20 for SHA-1, 32 for SHA-256). Names come back as
    `decode` gives them; a truncated entry ends the list (a damaged object is never
    read past its end)."""
    entries = []
    pos, end = 0, len(data)
    while pos < end:
        space = data.find(b" ", pos)
        nul = data.find(b"\0", space + 1) if space >= 0 else -1
        if space < 0 or nul < 0 or nul + 1 + oid_bytes > end:
            break
        mode = data[pos:space].decode("ascii", "replace")
        name = decode(data[space + 1 : nul])
        entries.append((mode, name, data[nul + 1 : nul + 1 + oid_bytes].hex()))
        pos = nul + 1 + oid_bytes
    return entries


class BlobReader:
    """One `git cat-file --batch` process for several rounds of reads (`read(names)` like
    `cat_files`), so a reader that only learns what it needs from what it read first does
    not start a cat-file process per round (each round still lists the names' object ids:
    one `ls-files`/`ls-tree` per revision). Requests go in chunks far below a pipe's
    buffer, each chunk's answers read before the next is sent: no deadlock."""

    CHUNK = 128

    def __init__(self, cwd: Path) -> None:
        self._cwd = cwd
        self._proc = start_git(BATCH, cwd)

    def read(self, names: Iterable[str]) -> dict[str, bytes | None]:
        """Contents of objects named like `:path` or `HEAD:path` (None where missing)."""
        return _read_named(names, self._cwd, self.read_blobs)

    def read_blobs(self, oids: Iterable[str]) -> dict[str, bytes | None]:
        """Contents of blobs by object id (None where missing or not a blob)."""
        return self.read_objects(oids, "blob")

    def read_trees(self, oids: Iterable[str]) -> dict[str, list[tuple[str, str, str]] | None]:
        """Entries (mode, name, object id) of tree objects by id (None where missing or
        not a tree); see `parse_tree`."""
        raw = self.read_objects(oids, "tree")
        return {
            oid: None if data is None else parse_tree(data, len(oid) // 2)
            for oid, data in raw.items()
        }

    def read_objects(self, oids: Iterable[str], kind: str) -> dict[str, bytes | None]:
        """Raw contents of objects of type `kind` by id (None where missing or another type)."""
        oids = list(dict.fromkeys(oids))
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        result: dict[str, bytes | None] = {}
        for i in range(0, len(oids), self.CHUNK):
            chunk = oids[i : i + self.CHUNK]
            try:
                stdin.write(_batch_request(chunk))
                stdin.flush()
            except BrokenPipeError:
                raise GitError("git cat-file", "exited early") from None
            result.update(_answers(stdout, chunk, kind))
        return result

    def close(self) -> None:
        if self._proc.stdin is not None:
            # git may have exited already (e.g. not a repository): nothing left to flush
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc.wait()

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
