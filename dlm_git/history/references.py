"""Which DVC cache objects the history references, and what references each one first.

Invariants:
- The history is every commit reachable from any ref or from HEAD
  (`gitio.all_commits`, parents before children), then the work tree's own `dvc.lock`
  (outs that `dvc repro` produced and nothing has committed yet are referenced too).
- Git is read through one `cat-file --batch` for the whole history: each distinct tree
  object is read and summarised once (the records, and the files that bear on which
  documents it holds: `docset.bears_on_documents`), so a commit that changes one
  directory costs the trees on the path to it; every record blob (each `dvc.lock`, each
  `*.dvc` file, `params.yaml`) is read and parsed once per blob id. Symbolic links and
  submodules are never records. (A `docat.TreeAt` per commit would re-list every tree of
  the history; the walk keeps its summaries and applies `TreeAt`'s rule to them.)
- Every out with an md5 of every stage of every record is referenced (DVC caches the
  token stages' outs as well as the adapters), except a file out that git tracks in the
  same commit (or, for the work tree, in the index): a `cache: false` out (dlm.lock,
  manifest.json, metrics) lives in git, never in the DVC cache, and DVC refuses to cache
  an out git tracks. Objects are deduplicated by md5, and each
  keeps its first referrer: the oldest commit, parents first. An out `<doc>/adapter` or
  `<doc>/segments` of the root `dvc.lock`, for a document of that commit, is attributed
  to that document. The documents of a commit are `TreeAt.documents()`'s: the same
  `docset.read_params` (labelled `docat.rev_label`) and `docset.documents` on the
  summary.
- Records are hostile: every md5 is checked by `dlm_git.dvcfiles` before it names
  anything, and a malformed record is a note against the commit that holds it, never a
  path; nothing here opens a file in the DVC cache.
- A params.yaml that every reader refuses (nested too deep: hook, verify, diff and log
  stop on it with `read_params`'s error) is a `CommitError` carrying that very error,
  once per blob, against the first commit holding it; its commits name no documents,
  and their records are still read: one hostile commit never hides the rest of the
  history.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from dlm_git import gitio
from dlm_git.docat import prefix_of, rev_label
from dlm_git.docset import (
    PARAMS_NAME,
    Params,
    Tree,
    bears_on_documents,
    documents,
    read_params,
)
from dlm_git.dvcfiles import DVC_LOCK, DvcOut, DvcRecordError, parse_dvc_lock, record_outs
from dlm_git.errors import DlmGitError
from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, read_regular
from dlm_git.layout import DOC_OUTS

RECORD_SUFFIX = ".dvc"


@dataclass(frozen=True)
class Referrer:
    """Where an object is referenced first."""

    commit: str | None
    """The commit (full id); None: the work tree's `dvc.lock`."""
    record: str
    """The record naming it: `dvc.lock`, `sub/dvc.lock`, `data.dvc` (repository path)."""
    out: str
    """The out's path (repository path; `<out>/<relpath>` for a directory's file)."""
    doc: str | None
    """The document whose adapter or segments this is, if it is one."""
    order: int
    """Position of the commit in the history (parents first); the work tree is last."""

    def entry(self, relpath: str) -> Referrer:
        """The referrer of file `relpath` of this directory out."""
        return Referrer(self.commit, self.record, f"{self.out}/{relpath}", self.doc, self.order)


@dataclass(frozen=True)
class CommitError:
    """A file of a commit that every reader of that commit refuses, with the error they
    stop on; fsck reports it and reads on."""

    commit: str
    """The first commit (full id, parents first) holding the file as it is."""
    path: str
    """The file (repository path)."""
    error: DlmGitError


@dataclass
class References:
    """md5 -> first referrer, in the order first seen; plus what could not be read."""

    commits: int = 0
    objects: dict[str, Referrer] = field(default_factory=dict)
    run_cache: dict[str, Referrer] = field(default_factory=dict)
    """Objects DVC's run cache names (outs of earlier runs it can restore): checked when
    present and not orphans, but not missing when absent (DVC may have dropped them)."""
    notes: list[str] = field(default_factory=list)
    """Records that do not parse (each a line naming the commit and file)."""
    errors: list[CommitError] = field(default_factory=list)
    """Files every reader refuses (a too-deep params.yaml): fsck fails on them."""

    def add(self, md5: str, referrer: Referrer) -> None:
        known = self.objects.get(md5)
        if known is None or referrer.order < known.order:
            self.objects[md5] = referrer


def is_record(path: str) -> bool:
    """A DVC record: a `dvc.lock` (root or a subdirectory's) or a `<name>.dvc` file."""
    base = posixpath.basename(path)
    return base == DVC_LOCK or (base.endswith(RECORD_SUFFIX) and base != RECORD_SUFFIX)


@dataclass
class _TreeInfo:
    records: list[tuple[str, str]]
    """(path, blob id) of the tree's DVC records."""
    params: str | None
    """Blob id of the root params.yaml."""
    paths: list[str]
    """The paths of the summary (what `docset.Tree.from_paths` needs of the listing)."""


TREE_MODE = "40000"
SUBMODULE_MODE = "160000"


def _relevant(name: str) -> bool:
    """A file name that a summary keeps: DVC records, and what bears on documents."""
    return bears_on_documents(name) or is_record(name)


class _Trees:
    """The history's tree objects, each read once through one `cat-file --batch` and
    summarised once: a commit that changes one directory costs reading the trees on the
    path to it, not a listing of the whole tree."""

    def __init__(self, reader: gitio.BlobReader) -> None:
        self.reader = reader
        self.entries: dict[str, dict[str, tuple[str, str]]] = {}
        """tree -> name -> (mode, object id)."""
        self.summaries: dict[str, list[tuple[str, str, str]]] = {}
        """tree -> (path, mode, object id) of the relevant files under it (links and
        submodules included: a listing holds them too)."""

    def _load(self, root: str) -> None:
        """Read every tree reachable from `root` not read yet, a level per round trip."""
        frontier = [root] if root not in self.entries else []
        while frontier:
            nxt: list[str] = []
            for oid, listed in self.reader.read_trees(frontier).items():
                table = {name: (mode, child) for mode, name, child in listed or []}
                self.entries[oid] = table
                nxt += [c for m, c in table.values() if m == TREE_MODE and c not in self.entries]
            frontier = list(dict.fromkeys(nxt))

    def info(self, root: str) -> _TreeInfo:
        """The records, params.yaml and relevant paths of tree `root`. A link or submodule
        is never a record and a submodule never params.yaml, but each is a path of the
        listing, as it is in `TreeAt`'s."""
        self._summarise(root)
        info = _TreeInfo([], None, [])
        for path, mode, oid in self.summaries[root]:
            if path == PARAMS_NAME and mode != SUBMODULE_MODE:
                info.params = oid
            if is_record(path) and mode not in (gitio.SYMLINK_MODE, SUBMODULE_MODE):
                info.records.append((path, oid))
            info.paths.append(path)
        return info

    def _summarise(self, root: str) -> None:
        """Summarise `root` and every tree under it not summarised yet."""
        self._load(root)
        stack = [(root, False)]
        while stack:  # post-order, without recursion (a hostile tree may be very deep)
            oid, children_done = stack.pop()
            if oid in self.summaries:
                continue
            table = self.entries.get(oid, {})
            if not children_done:
                stack.append((oid, True))
                stack += [
                    (c, False)
                    for m, c in table.values()
                    if m == TREE_MODE and c not in self.summaries
                ]
                continue
            summary: list[tuple[str, str, str]] = []
            for name, (mode, child) in table.items():
                if mode == TREE_MODE:
                    below = self.summaries.get(child, [])
                    summary += [(f"{name}/{path}", m, o) for path, m, o in below]
                elif _relevant(name):
                    summary.append((name, mode, child))
            self.summaries[oid] = summary

    def tracks(self, root: str, path: str) -> bool:
        """Whether tree `root` holds a file (not a directory or submodule) at `path`."""
        oid = root
        *dirs, name = path.split("/")
        for part in dirs:
            entry = self.entries.get(oid, {}).get(part)
            if entry is None or entry[0] != TREE_MODE:
                return False
            oid = entry[1]
        entry = self.entries.get(oid, {}).get(name)
        return entry is not None and entry[0] not in (TREE_MODE, SUBMODULE_MODE)


def _parse(path: str, data: bytes | None) -> tuple[list[DvcOut], list[str]]:
    """The outs of record `path` (its bytes `data`), and what is wrong with it."""
    if data is None:
        return [], []
    try:
        record = parse_dvc_lock(data)
    except DvcRecordError as exc:
        return [], [exc.message]
    outs, errors = record_outs(record, path)
    return outs, [exc.message for exc in errors]


def collect(root: Path, cache: Path | None = None) -> References:
    """Every object the history's records reference, with its first referrer (and, given
    the DVC `cache` directory, what its run cache names). An out
    that the same commit tracks in git (`cache: false`: dlm.lock, manifest.json,
    metrics) is git's, never in the DVC cache, and is left out (DVC refuses to cache
    an out that git tracks)."""
    refs = References()
    commits = gitio.all_commits(root)
    refs.commits = len(commits)
    with gitio.BlobReader(root) as reader:
        walk = _Walk(reader, refs)
        for order, (sha, tree) in enumerate(commits):
            walk.commit(order, sha, tree)
    _worktree(root, refs, len(commits))
    if cache is not None:
        _run_cache(root, cache, refs, len(commits) + 1)
    return refs


class _Walk:
    """The history, commit by commit (parents first), through one `cat-file` process:
    each tree summarised once, each record and params.yaml blob parsed once."""

    def __init__(self, reader: gitio.BlobReader, refs: References) -> None:
        self.reader, self.refs = reader, refs
        self.trees = _Trees(reader)
        self.seen: set[str] = set()
        self.parsed: dict[str, tuple[list[DvcOut], list[str]]] = {}
        """record blob -> its outs and what is wrong with it."""
        self.params: dict[str, Params | None] = {}
        """params.yaml blob -> what it says; None: refused (a `CommitError`)."""

    def commit(self, order: int, sha: str, tree: str) -> None:
        """Reference the outs of commit `sha`'s records (an earlier commit with the same
        tree referenced all of them first)."""
        if tree in self.seen:
            return
        self.seen.add(tree)
        info = self.trees.info(tree)
        wanted = [oid for _, oid in info.records if oid not in self.parsed]
        if info.params is not None and info.params not in self.params:
            wanted.append(info.params)
        blobs = self.reader.read_blobs(wanted)
        for path, oid in info.records:
            if oid not in self.parsed:
                self.parsed[oid] = _parse(path, blobs.get(oid))
                self.refs.notes += [f"{sha[:12]}:{path}: {what}" for what in self.parsed[oid][1]]
        params = self._params(sha, info.params, blobs)
        doc_of = self._doc_outs(params, info) if params is not None else {}
        for path, oid in info.records:
            for out in self.parsed[oid][0]:
                where = _out_path(path, out.path)
                if not out.is_dir and self.trees.tracks(tree, where):
                    continue
                doc = doc_of.get(out.path) if path == DVC_LOCK else None
                self.refs.add(out.md5, Referrer(sha, path, where, doc, order))

    def _params(self, sha: str, oid: str | None, blobs: dict[str, bytes | None]) -> Params | None:
        """params.yaml (blob `oid`) as every reader reads it (`docset.read_params`); None
        when they refuse it: an error against `sha`, the first commit holding it."""
        if oid is None:
            return read_params(None, rev_label(sha))
        if oid not in self.params:
            try:
                self.params[oid] = read_params(blobs.get(oid), rev_label(sha))
            except DlmGitError as exc:
                self.refs.errors.append(CommitError(sha, PARAMS_NAME, exc))
                self.params[oid] = None
        return self.params[oid]

    @staticmethod
    def _doc_outs(params: Params, info: _TreeInfo) -> dict[str, str]:
        """out path -> document, for the documents' adapter and segments outs of the root
        dvc.lock (the documents as `TreeAt.documents()` finds them)."""
        if not any(path == DVC_LOCK for path, _ in info.records):
            return {}
        docs = documents(params, Tree.from_paths(info.paths))
        return {prefix_of(doc) + name: doc for doc in docs for name in DOC_OUTS}


def _out_path(record: str, out: str) -> str:
    """An out's repository path: relative to its record's directory."""
    directory = posixpath.dirname(record)
    return posixpath.join(directory, out) if directory else out


def _worktree(root: Path, refs: References, order: int) -> None:
    """The work tree's root dvc.lock: outs reproduced and not committed yet."""
    try:
        data = read_regular(root / DVC_LOCK, MAX_RECORD_BYTES, follow_symlinks=False)
    except (OSError, NotRegularFile):
        return
    outs, problems = _parse(DVC_LOCK, data)
    refs.notes += [f"work tree {DVC_LOCK}: {what}" for what in problems]
    files = [out.path for out in outs if not out.is_dir]
    tracked = set(gitio.ls_files(files, root)) if files else set()
    for out in outs:
        if out.path not in tracked:
            refs.add(out.md5, Referrer(None, DVC_LOCK, out.path, None, order))


def _run_cache(root: Path, cache: Path, refs: References, order: int) -> None:
    """The outs DVC's run cache (`<cache>/runs/<2>/<key>/<entry>`) records."""
    runs = cache / "runs"
    if not runs.is_dir() or runs.is_symlink():
        return
    for path in sorted(runs.glob("*/*/*")):
        try:
            data = read_regular(path, MAX_RECORD_BYTES, follow_symlinks=False)
        except (OSError, NotRegularFile):
            continue
        outs, _ = _parse(path.name, data)
        try:
            record = path.relative_to(root).as_posix()
        except ValueError:
            record = str(path)
        for out in outs:
            if out.md5 not in refs.run_cache:
                refs.run_cache[out.md5] = Referrer(None, record, out.path, None, order)
