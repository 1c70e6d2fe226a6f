"""A commit's (or the index's) files, read and written out under a directory.

Invariants:
- Only what the one path-safety rule (`dlm_git.paths`) accepts is written, and never a
  symbolic link: a hostile tree object can hold entries git itself would never check
  out, and a link's target text must not become a file that looks like content, nor a
  link to follow here.
- `CommitFiles` lists a whole commit once and reads it through one `cat-file` process
  (a commit of many documents costs two git processes, not two per document).
"""

from __future__ import annotations

import bisect
import functools
import posixpath
from collections.abc import Iterable, Sequence
from pathlib import Path

from dlm_git.gitio.listing import SYMLINK_MODE, ls_index, tree_entries
from dlm_git.gitio.objects import BlobReader, read_blobs
from dlm_git.gitio.process import git
from dlm_git.paths import is_safe


def materialize(paths: Sequence[str], dest: Path, cwd: Path, rev: str | None = None) -> None:
    """Write the index's (or commit `rev`'s) version of `paths` under `dest`. Symbolic
    links are left out: sources never follow them (`doc/walk.py`), and a link's target
    text must not become a file that looks like content, nor a link to follow here."""
    if rev is None:
        files = [path for mode, path in ls_index(paths, cwd) if mode != SYMLINK_MODE]
        if not files:
            return
        prefix = str(dest).rstrip("/") + "/"
        payload = "\0".join(files).encode("utf-8", "surrogateescape") + b"\0"
        git(["checkout-index", "-z", "--stdin", f"--prefix={prefix}"], cwd, input=payload)
        return
    entries = [
        (oid, path)
        for mode, kind, oid, path in tree_entries(paths, cwd, rev, recursive=True)
        if _writable(mode, kind, path)
    ]
    _write_blobs(entries, read_blobs((oid for oid, _ in entries), cwd), dest)


def _writable(mode: str, kind: str, path: str) -> bool:
    """A listed entry `materialize` writes: a file, not a link, inside the destination."""
    return kind == "blob" and mode != SYMLINK_MODE and is_safe(path)


def _write_blobs(
    entries: Sequence[tuple[str, str]], blobs: dict[str, bytes | None], dest: Path
) -> None:
    made: set[Path] = set()  # directories already there: one mkdir each, not one per file
    for oid, path in entries:
        data = blobs.get(oid)
        if data is None:
            continue
        target = dest / path
        try:
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            target.write_bytes(data)
        except OSError:
            continue  # a tree naming a file and a directory alike: the checks see it missing


class CommitFiles:
    """Every file of one commit, listed once (`ls-tree -r`) and read through one
    `BlobReader`: reading many documents of a commit costs two git processes in all, not
    several per document. `paths`, `read` and `materialize` answer as `ls_files(["."],
    rev=rev)`, `cat_files` of `<rev>:path` names and `materialize(paths, dest, rev=rev)`
    do. A listing git cannot make (a missing tree object) is a `GitError`."""

    KEEP_BYTES = 1 << 26
    """How many bytes of blobs `read` keeps by object id, for the next document that reads
    the same blob (every document of a commit reads its one dvc.lock)."""

    def __init__(self, rev: str, cwd: Path) -> None:
        self._rev, self._cwd = rev, cwd
        self._reader: BlobReader | None = None
        self._kept: dict[str, bytes] = {}
        self._kept_bytes = 0

    @functools.cached_property
    def entries(self) -> list[tuple[str, str, str, str]]:
        """(mode, type, object id, path) of every file (and submodule) of the commit."""
        return tree_entries([], self._cwd, self._rev, recursive=True, check=True)

    @functools.cached_property
    def _blob_ids(self) -> dict[str, str]:
        return {path: oid for _, kind, oid, path in self.entries if kind == "blob"}

    def paths(self) -> list[str]:
        return [path for *_, path in self.entries]

    def read(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        """Contents of the commit's blobs at `paths` (None where there is none)."""
        paths = list(dict.fromkeys(paths))
        ids = {p: self._blob_ids[p] for p in paths if p in self._blob_ids}
        blobs: dict[str, bytes | None] = {i: self._kept[i] for i in ids.values() if i in self._kept}
        blobs.update(self._blobs().read_blobs(i for i in ids.values() if i not in blobs))
        for oid, data in blobs.items():
            self._keep(oid, data)
        return {p: blobs.get(ids[p]) if p in ids else None for p in paths}

    def _keep(self, oid: str, data: bytes | None) -> None:
        if data is None or oid in self._kept or self._kept_bytes + len(data) > self.KEEP_BYTES:
            return
        self._kept[oid] = data
        self._kept_bytes += len(data)

    @functools.cached_property
    def _sorted(self) -> tuple[list[str], list[int]]:
        """The listed paths in sorted order, and each one's place in `entries`."""
        order = sorted(range(len(self.entries)), key=lambda i: self.entries[i][3])
        return [self.entries[i][3] for i in order], order

    def named(self, paths: Iterable[str]) -> list[tuple[str, str, str, str]]:
        """The entries that `paths` name as literal pathspecs from the repository root
        name them in `ls-tree`: the path itself, everything under it, everything for `.`.
        In sorted order the paths under `p` are those from `p/` up to `p0` (`0` follows
        `/`), so each spec costs two binary searches however long or deep the paths are."""
        specs = {posixpath.normpath(p) for p in paths}
        if "." in specs:
            return list(self.entries)
        names, order = self._sorted
        hits: set[int] = set()
        for spec in specs:
            at = bisect.bisect_left(names, spec)
            if at < len(names) and names[at] == spec:
                hits.add(order[at])
            below = bisect.bisect_left(names, spec + "/", at)
            hits.update(order[below : bisect.bisect_left(names, spec + "0", below)])
        return [self.entries[i] for i in sorted(hits)]

    def materialize(self, paths: Sequence[str], dest: Path) -> None:
        """Write the commit's files that `paths` name (see `named`) under `dest`."""
        entries = [
            (oid, path)
            for mode, kind, oid, path in self.named(paths)
            if _writable(mode, kind, path)
        ]
        _write_blobs(entries, self._blobs().read_blobs(oid for oid, _ in entries), dest)

    def _blobs(self) -> BlobReader:
        if self._reader is None:
            self._reader = BlobReader(self._cwd)
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> CommitFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
