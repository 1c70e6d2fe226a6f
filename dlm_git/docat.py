"""A document at a revision: the index, the work tree or a commit, read one way.

`TreeAt(root, where)` is a tree at one revision, `DocAt` one document of it. Every reader
of documents (the pre-commit hook, `verify COMMIT`, `verify --worktree`, `diff`, `log`)
takes them from here.

Invariants:
- A tree is listed once: the index by one `ls-files -s -z` (`gitio.index_entries`), a
  commit by one `ls-tree -r -z` (`gitio.CommitFiles`), the work tree by one `ls-files
  --others --cached` (`gitio.worktree_files`), and only when a listing is asked for.
  Blobs are read in batches through one `cat-file --batch` process per tree, by object
  id; work-tree files through `fsutil.read_regular` (a FIFO or device is one line naming
  it, never a wait). Many documents of one tree cost a fixed number of git processes.
- Every revision reports its symbolic links (`TreeAt.symlinks`, `TreeAt.linked`): a
  commit's and the index's from their listing (mode `120000`), the work tree's from the
  disk, so a link refused in a commit is refused in the work tree and the index first.
- Which documents a tree holds is `docset.documents` on that one listing, with ONE
  treatment of a `params.yaml` that nests too deep at every revision: `docset.read_params`'s
  `DlmGitError` naming `<rev>:params.yaml` with the fix (`TreeAt.params`; fsck's history
  walk, which summarises trees incrementally, calls the same two functions).
- A document directory's `.dlm` is the one file ending `.dlm` *directly* inside it
  (`dlms_in`); none or several is "no document" (`DocAt.dlm_name` None), never the first
  of several and never one in a subdirectory.
- `materialize` writes the document directory and its source directories (from the
  `.dlm`'s `training.sources`) under a destination marked as a repository root, and
  nothing else; symbolic links are never written. The work tree is not copied: its
  document is read in place.
- The adapter of a commit is copied out of the DVC cache at the md5s its `dvc.lock`
  names (`copy_out`); the index's is read where the staged `dvc.lock` names it in the
  cache (or, with no `dvc.lock`, the work tree's `adapter/`); the work tree's is its
  `adapter/` beside the document. What is not there is a reason (a string); a malformed
  record raises `DvcRecordError` before anything it names is opened.
- Imports nothing heavy: the git hooks use it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from pathlib import Path
from typing import NamedTuple

from dlm_git import gitio
from dlm_git.doc.peek import source_dirs
from dlm_git.docset import PARAMS_NAME, Params, Tree, documents, read_params
from dlm_git.dvcfiles import (
    DvcOut,
    cache_object,
    copy_object,
    dir_listing,
    find_out_in,
    lock_outs,
)
from dlm_git.errors import UsageError
from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, read_regular
from dlm_git.layout import ADAPTER_DIR, LOCK_NAME, MANIFEST_NAME, SIGNATURE_NAME
from dlm_git.paths import plain_name

DVC_LOCK = "dvc.lock"


class Rev(Enum):
    """A revision that is not a commit."""

    INDEX = "index"
    WORKTREE = "work tree"


Where = Rev | str
"""`Rev.INDEX`, `Rev.WORKTREE`, or a commit's full object id."""


def rev_label(where: Where) -> str:
    """How errors name revision `where` by default: `index`, `work tree`, a short id."""
    return where.value if isinstance(where, Rev) else where[:12]


def prefix_of(doc_rel: str) -> str:
    """The repository path prefix of the files of document directory `doc_rel`."""
    return "" if doc_rel in ("", ".") else doc_rel + "/"


def dlms_in(listed: Iterable[str], doc_rel: str) -> list[str]:
    """The `.dlm` files directly inside `doc_rel` among repository paths `listed`."""
    prefix = prefix_of(doc_rel)
    return [
        p
        for p in listed
        if p.endswith(".dlm") and p.startswith(prefix) and "/" not in p[len(prefix) :]
    ]


def doc_rel(root: Path, doc: Path, command: str) -> str:
    """A `--doc PATH` (the document's directory or its `.dlm`) as a path relative to the
    repository root; a path outside the repository is `command`'s usage error."""
    path = Path(os.path.abspath(doc))
    if path.suffix == ".dlm":
        path = path.parent
    try:
        return path.relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        raise UsageError(command, f"{doc} is outside the repository") from None


class AdapterAt(NamedTuple):
    """Where the bytes of a document's adapter files are on this machine."""

    files: dict[str, Path]
    """File name -> its bytes' path (a DVC cache object, a copy, or a work-tree file)."""
    out: DvcOut | None = None
    """The `dvc.lock` out it was found through (None: a directory on disk)."""
    listing: dict[str, str] | None = None
    """That out's `.dir` listing (relpath -> md5), as the DVC cache holds it."""


class DocAt:
    """One document directory of a `TreeAt`: its `.dlm` and records as raw bytes (None:
    not in the tree). `dlms`: the `.dlm` files directly inside its directory."""

    __slots__ = ("tree", "rel", "dlms", "dlm", "lock", "manifest", "signature")

    def __init__(
        self,
        tree: TreeAt,
        rel: str,
        dlms: tuple[str, ...],
        dlm: bytes | None = None,
        lock: bytes | None = None,
        manifest: bytes | None = None,
        signature: bytes | None = None,
    ) -> None:
        self.tree, self.rel, self.dlms = tree, rel, dlms
        self.dlm, self.lock, self.manifest, self.signature = dlm, lock, manifest, signature

    @property
    def dlm_name(self) -> str | None:
        """The repository path of its `.dlm`; None unless exactly one is directly inside."""
        return self.dlms[0] if len(self.dlms) == 1 else None

    @property
    def prefix(self) -> str:
        return prefix_of(self.rel)

    @property
    def source_dirs(self) -> list[str]:
        """The repository directories its `training.sources` read (from the `.dlm`)."""
        return source_dirs(self.rel, self.dlm) if self.dlm is not None else []

    @property
    def dvc_lock(self) -> bytes | None:
        return self.tree.dvc_lock

    @property
    def reads_outside(self) -> bool:
        """Whether sources outside the repository are this revision's inputs (only the
        work tree's: no commit and no index holds a copy of them)."""
        return self.tree.where is Rev.WORKTREE

    def materialize(self, dest: Path) -> tuple[Path, Path] | None:
        """(the `.dlm`'s path, the repository root) of a tree holding this document's
        inputs: written under `dest` for the index and a commit, the work tree itself for
        the work tree; None without a single `.dlm`. params.yaml comes too: its
        `docs.<doc>` settings are inputs of the training (`dlm_git.train.doc_params`)."""
        if self.dlm_name is None:
            return None
        if self.tree.where is Rev.WORKTREE:
            return self.tree.root / self.dlm_name, self.tree.root
        (dest / ".git").mkdir(parents=True, exist_ok=True)  # marks the repository root
        params = [PARAMS_NAME] if PARAMS_NAME in self.tree.entries else []
        self.tree.materialize([self.rel, *self.source_dirs, *params], dest)
        return dest / self.dlm_name, dest

    def adapter(self, dest: Path) -> AdapterAt | str:
        """The adapter's files (a commit's copied into `dest`), or why they are not here."""
        return self.tree.adapter(self.rel, dest)


class TreeAt:
    """A tree at one revision of the repository at `root`, listed once (lazily) and read
    in batches. Use as a context manager (it may hold a `cat-file` process). `share`:
    another tree of the same repository whose `cat-file` process this one reads through
    (objects are read by id: one process serves the index and HEAD alike)."""

    def __init__(
        self, root: Path, where: Where, label: str | None = None, share: TreeAt | None = None
    ) -> None:
        self.root, self.where = root, where
        self.label = label or rev_label(where)
        self._reader: gitio.BlobReader | None = None
        self._share = share
        self._commit = gitio.CommitFiles(where, root) if isinstance(where, str) else None

    # ------------------------------------------------------------------ listing and reads

    @functools.cached_property
    def entries(self) -> dict[str, tuple[str, str]]:
        """Path -> (mode, object id) of every file of the tree (the work tree: no ids). A
        path listed twice (a tree made by hand) is its first entry, the one git's own
        lookups (`HEAD:path`) and `verify` read."""
        entries: dict[str, tuple[str, str]] = {}
        for path, entry in self._listing:
            entries.setdefault(path, entry)
        return entries

    @functools.cached_property
    def _listing(self) -> list[tuple[str, tuple[str, str]]]:
        """(path, (mode, object id)) of every entry, as git lists it."""
        if self.where is Rev.INDEX:
            return [(path, (mode, oid)) for mode, oid, path in gitio.index_entries([], self.root)]
        if self.where is Rev.WORKTREE:
            return [(path, ("", "")) for path in gitio.worktree_files(self.root)]
        assert self._commit is not None
        return [(path, (mode, oid)) for mode, _, oid, path in self._commit.entries]

    @functools.cached_property
    def in_git_order(self) -> bool:
        """Whether every path is listed once, in git's order (by bytes), as in every tree
        and index git writes. A tree written by hand (`mktree` given a name twice, `hash-
        object --literally`) may list a path twice or out of order: `entries` then keeps
        only the first entry of a path, and git's own comparisons walk it differently."""
        if len(self.entries) != len(self._listing):
            return False  # a path listed twice
        paths = list(self.entries)  # each path once: in the listing's order
        try:
            "\0".join(paths).encode("utf-8")
        except UnicodeEncodeError:  # a name that is not UTF-8: compare its bytes
            raw = [path.encode("utf-8", "surrogateescape") for path in paths]
            return raw == sorted(raw)
        return paths == sorted(paths)  # UTF-8 keeps code point order: text order is git's

    def symlinks(self, dirs: Sequence[str]) -> list[str]:
        """The symbolic links the tree holds under `dirs` (the work tree's: on disk)."""
        wanted = set(dirs)
        return [p for p in self.entries if _under(p, wanted) and self._is_link(p)]

    def linked(self, paths: Iterable[str]) -> set[str]:
        """The paths among `paths` that are a symbolic link of this tree or lie below one
        (a linked directory): what no reader of this tree takes as a file. One rule for
        every revision: a commit's and the index's links are their listing's, the work
        tree's are on disk (`lstat` of each component), so a link refused once committed
        is refused in the work tree and the index before."""
        found = set()
        for path in paths:
            parts = path.split("/")
            if any(self._is_link("/".join(parts[:i])) for i in range(1, len(parts) + 1)):
                found.add(path)
        return found

    def _is_link(self, path: str) -> bool:
        if self.where is Rev.WORKTREE:
            return os.path.islink(self.root / path)
        return self.entries.get(path, ("", ""))[0] == gitio.SYMLINK_MODE

    def read(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        """The bytes of the tree's files at `paths` (None where there is none)."""
        paths = list(dict.fromkeys(paths))
        if self.where is Rev.WORKTREE:
            return {p: _read_file(self.root / p) for p in paths}
        if self._commit is not None and self._share is None:
            return self._commit.read(paths)
        ids = {p: self.entries[p][1] for p in paths if p in self.entries}
        blobs = self._blobs().read_blobs(ids.values())
        return {p: blobs.get(ids[p]) if p in ids else None for p in paths}

    def _blobs(self) -> gitio.BlobReader:
        if self._share is not None:
            return self._share._blobs()
        if self._reader is None:
            self._reader = gitio.BlobReader(self.root)
        return self._reader

    @functools.cached_property
    def dvc_lock(self) -> bytes | None:
        return self.read([DVC_LOCK])[DVC_LOCK]

    def materialize(self, paths: Sequence[str], dest: Path) -> None:
        """Write the tree's files under `paths` into `dest` (no symbolic links)."""
        if self._commit is not None:
            self._commit.materialize(paths, dest)
        elif self.where is Rev.INDEX:
            gitio.materialize(paths, dest, self.root)
        else:
            raise ValueError("the work tree is read in place, never materialized")

    # ------------------------------------------------------------------ documents

    @functools.cached_property
    def params(self) -> Params:
        """params.yaml's `documents:` as this tree has it. One nested past the bound is
        `docset.read_params`'s `DlmGitError` naming `<label>:params.yaml`, whoever reads
        it: hook, verify, diff, log, sign and fsck refuse it alike (everything else wrong
        with it is a `Params` problem)."""
        return read_params(self.read([PARAMS_NAME])[PARAMS_NAME], self.label)

    @functools.cached_property
    def tree(self) -> Tree:
        return Tree.from_paths(self.entries)

    def documents(self) -> list[str]:
        """The document directories of this tree (`dlm_git.docset`'s rule)."""
        return documents(self.params, self.tree)

    def dlms(self, rel: str) -> tuple[str, ...]:
        """The `.dlm` files directly inside `rel` (the work tree's: on disk)."""
        if self.where is Rev.WORKTREE:
            return tuple(_dlms_on_disk(self.root, rel))
        return tuple(self.tree.dlms.get(rel, []))

    def doc(self, rel: str) -> DocAt:
        return self.docs([rel])[0]

    def docs(self, rels: Sequence[str], keep: Callable[[DocAt], bool] | None = None) -> list[DocAt]:
        """The documents at `rels`, read in two batches: every `.dlm` first, then the
        records of those `keep` accepts (it sees `rel`, `dlm_name` and `dlm`)."""
        found = [DocAt(self, rel, self.dlms(rel)) for rel in rels]
        dlms = self.read(d.dlm_name for d in found if d.dlm_name is not None)
        for d in found:
            d.dlm = dlms.get(d.dlm_name) if d.dlm_name is not None else None
        kept = [d for d in found if keep is None or keep(d)]
        names = (LOCK_NAME, MANIFEST_NAME, SIGNATURE_NAME)
        blobs = self.read(d.prefix + n for d in kept for n in names)
        for d in kept:
            d.lock, d.manifest, d.signature = (blobs[d.prefix + n] for n in names)
        return kept

    # ------------------------------------------------------------------ the adapter

    def adapter(self, rel: str, dest: Path) -> AdapterAt | str:
        """See `DocAt.adapter`."""
        if self.where is Rev.WORKTREE:
            return _adapter_dir(self.root / (prefix_of(rel) + ADAPTER_DIR))
        if self.where is Rev.INDEX:
            if self.dvc_lock is None:
                return _adapter_dir(self.root / (prefix_of(rel) + ADAPTER_DIR), no_dvc=True)
            return cached_adapter(self.root, self.dvc_lock, rel)
        why = copy_out(self.root, self.dvc_lock, rel, ADAPTER_DIR, dest)
        if why is not None:
            return why
        files = {p.name: p for p in sorted(dest.iterdir())} if dest.is_dir() else {}
        return AdapterAt(files)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._commit is not None:
            self._commit.close()

    def __enter__(self) -> TreeAt:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


NO_PIPELINE = "no dvc.lock and no adapter/ here: adapter not checked"
"""Why the index's adapter is absent when there is no DVC pipeline at all."""


def cached_adapter(root: Path, dvc_lock: bytes, rel: str) -> AdapterAt | str:
    """The adapter `dvc_lock` records for document `rel`, read in place in the DVC cache
    (a listed file the cache lacks keeps its path: reading it fails). Only the stages
    that name it are parsed (`dvcfiles.find_out_in`): one document of a large dvc.lock."""
    path = prefix_of(rel) + ADAPTER_DIR
    out = find_out_in(dvc_lock, path)
    if out is None:
        return f"dvc.lock records no {path}"
    listing = dir_listing(root, out.md5)
    if listing is None:
        return f"adapter {out.md5} named by dvc.lock is not in the DVC cache"
    files = {name: cache_object(root, md5) for name, md5 in listing.items()}
    return AdapterAt(files, out, listing)


def copy_out(root: Path, dvc_lock: bytes | None, doc: str, name: str, dest: Path) -> str | None:
    """Copy the directory out `<doc>/<name>` that `dvc_lock` records from the DVC cache
    into `dest`: None if that worked, else what is absent. A malformed record (dvc.lock,
    an md5, the `.dir` listing) raises `DvcRecordError` before anything it names is
    opened; a listed name that is not a plain file name is never written."""
    if dvc_lock is None:
        return f"the commit has no dvc.lock recording {name}/"
    out_path = prefix_of(doc) + name
    out = lock_outs(dvc_lock).find(out_path)
    if out is None:
        return f"the commit's dvc.lock records no {out_path}"
    listing = dir_listing(root, out.md5)
    if listing is None:
        return f"{name}/ {out.md5} is not in the DVC cache (run `dvc fetch` / `dvc pull`)"
    dest.mkdir(parents=True, exist_ok=True)
    for rel, md5 in listing.items():
        if not plain_name(rel):
            continue  # never written outside `dest`; dvc.binding reports the entry
        try:
            copy_object(cache_object(root, md5), dest / rel)
        except (FileNotFoundError, NotADirectoryError):
            return f"{name}/{rel} ({md5}) is not in the DVC cache (run `dvc fetch`)"
    return None


def _adapter_dir(directory: Path, no_dvc: bool = False) -> AdapterAt | str:
    """The files of an adapter directory on disk, or why there is none."""
    if not directory.is_dir() or directory.is_symlink():
        return NO_PIPELINE if no_dvc else f"no {ADAPTER_DIR}/ beside the document"
    return AdapterAt({p.name: p for p in sorted(directory.iterdir())})


def _dlms_on_disk(root: Path, rel: str) -> list[str]:
    """The `.dlm` files directly inside work-tree directory `rel` (files, not links)."""
    try:
        names = sorted(e.name for e in os.scandir(root / rel) if e.is_file(follow_symlinks=False))
    except OSError:
        return []
    return [prefix_of(rel) + n for n in names if n.endswith(".dlm")]


def _under(path: str, wanted: set[str]) -> bool:
    """Whether `path` is one of `wanted` or below one of them (a set lookup per level)."""
    if "." in wanted or "" in wanted or path in wanted:
        return True
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        if path in wanted:
            return True
    return False


def _read_file(path: Path) -> bytes | None:
    """A work-tree file (None when absent or a directory; a FIFO or device there is
    `NotRegularFile`, one line naming it, never a wait)."""
    try:
        return read_regular(path, MAX_RECORD_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except NotRegularFile:
        if path.is_dir():
            return None
        raise


def materialize(root: Path, doc: str, rev: str, dest: Path) -> Path | None:
    """Write document `doc` of commit `rev` and its source directories under `dest`; the
    `.dlm`'s path there, or None without a single `.dlm` (`DocAt.materialize`)."""
    with TreeAt(root, rev) as tree:
        placed = tree.doc(doc).materialize(dest)
    return placed[0] if placed is not None else None
