"""Git access through git's own plumbing commands: the one place dlm-git talks to git.

Invariants:
- Plain `git` subprocesses, so `GIT_INDEX_FILE` (which git sets inside hooks for
  `git commit -a` and `git commit <path>`) and `GIT_DIR` are honoured exactly as git
  does; no library that might read a different index.
- A file name never travels on a line: paths are listed NUL-terminated (`ls-tree -z`,
  `ls-files -z`), given as literal pathspecs (`--literal-pathspecs`: no globs, no
  magic) on the command line or NUL-terminated on stdin, and blobs are read from
  `git cat-file --batch` by *object id* (40 hex digits), never by `<rev>:<path>` name.
  A name holding a newline, a carriage return or `:0:` cannot split a request or be
  read as another object: every answer belongs to the path it was asked for.
- Callers name objects `:path` (the index, stage 0) or `<rev>:path` (a commit's tree),
  with `path` relative to the repository root, and pass the repository root as `cwd`.
  A batch of names costs one `ls-files`/`ls-tree` per revision plus one `cat-file`;
  `CommitFiles` lists a whole commit once and reads it through one `cat-file` process
  (a commit of many documents costs two git processes, not two per document).
- git answers about the objects themselves, never about a rewriting of them: every git
  child process runs in `child_env()`, with replace refs (`refs/replace/*`, `git replace
  --graft`) and grafts (`info/grafts`, `GIT_GRAFT_FILE`) switched off. They change the
  trees, blobs and parents git returns for an object id without changing the id, and can
  arrive with a fetch, so a verdict reached through them would be remembered for a
  commit whose own objects were never judged. What the auditor's environment and
  repository configure is honoured (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, which
  git sets inside hooks; the object directories and alternates; `GIT_CONFIG_*`):
  none of it travels with a commit, and an object directory only holds objects under
  their own ids. Pathspec modes git refuses beside `--literal-pathspecs` are dropped
  from the environment (`CLEARED`).
- Nothing here imports anything heavy: the hooks use it.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
import posixpath
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlm_git.errors import DlmGitError


class GitError(DlmGitError):
    """A git command failed."""


NO_GRAFT_FILE = os.path.join(os.devnull, "dlm-git-no-grafts")
"""A path that cannot exist (under a device file, not a directory): git then reads no
graft file at all, and prints no deprecation hint for one."""

REWRITES_OFF = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": NO_GRAFT_FILE}
"""What every git child process runs with: no replace refs (the variable `git
--no-replace-objects` sets), and no graft file in place of `<git dir>/info/grafts`
(git 2.39 reads that one even with replace refs off)."""

CLEARED = ("GIT_REPLACE_REF_BASE", "GIT_GLOB_PATHSPECS", "GIT_ICASE_PATHSPECS")
"""Variables dropped from a git child's environment: the replace-ref namespace (moot with
replace refs off), and the pathspec modes git refuses beside `--literal-pathspecs` (every
listing would fail, and an honest commit would look empty)."""


def child_env() -> dict[str, str]:
    """The environment of every git child process dlm-git starts: the caller's, with
    git's object rewriting switched off (`REWRITES_OFF`) and `CLEARED` removed."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(REWRITES_OFF)
    return env


def git(args: Sequence[str], cwd: Path, input: bytes | None = None, check: bool = True) -> bytes:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, env=child_env()
    )
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]}", msg[-1] if msg else f"exit {proc.returncode}")
    return proc.stdout


LITERAL = "--literal-pathspecs"
"""git's global option that takes every pathspec as a literal path (no `*`, no `:(...)`)."""


def toplevel(cwd: Path) -> Path:
    out = git(["rev-parse", "--show-toplevel"], cwd, check=False).decode().strip()
    if not out:
        raise GitError(str(cwd), "not inside a git work tree", "run `git init` first")
    return Path(out)


def hooks_path(cwd: Path) -> Path:
    """Where git looks for hooks (`core.hooksPath` honoured), as an absolute path."""
    return git_path("hooks", cwd)


def git_path(name: str, cwd: Path) -> Path:
    """`name` inside the repository's git directory (`git rev-parse --git-path`), absolute:
    machine-local state that is never part of the work tree."""
    out = git(["rev-parse", "--git-path", name], cwd, check=False).decode().strip()
    if not out:
        raise GitError(str(cwd), "not a git repository", "run `git init` first")
    path = Path(out)
    return path if path.is_absolute() else cwd / path


def toplevel_and_head(cwd: Path) -> tuple[Path, str | None]:
    """The work tree's root and HEAD's commit (None before the first commit), in one call."""
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel", "--verify", "--quiet", "HEAD^{commit}"],
        cwd=cwd,
        capture_output=True,
        env=child_env(),
    )
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if not lines or not lines[0]:
        raise GitError(str(cwd), "not inside a git work tree", "run `git init` first")
    head = lines[1].strip() if proc.returncode == 0 and len(lines) > 1 else None
    return Path(lines[0]), head or None


def resolve_commit(rev: str, cwd: Path) -> str | None:
    out = git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd, check=False)
    sha = out.decode().strip()
    return sha or None


_UNKNOWN = "?"


def staged_paths(cwd: Path, head: str | None = _UNKNOWN) -> list[str]:
    """Paths whose index entry differs from HEAD (all of them before the first commit).
    `head`: HEAD's commit if already resolved (None: there is no HEAD yet)."""
    if head == _UNKNOWN:
        head = resolve_commit("HEAD", cwd)
    against = head if head else _empty_tree(cwd)
    out = git(["diff-index", "--cached", "--name-only", "--no-renames", "-z", against], cwd)
    return [p for p in _decode(out).split("\0") if p]


def _empty_tree(cwd: Path) -> str:
    return git(["hash-object", "-t", "tree", "--stdin"], cwd, input=b"").decode().strip()


def _decode(out: bytes) -> str:
    """git's bytes as str; names that are not UTF-8 round-trip (surrogateescape)."""
    return out.decode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------- listings


def tree_entries(
    paths: Sequence[str], cwd: Path, rev: str, recursive: bool = False, check: bool = False
) -> list[tuple[str, str, str, str]]:
    """(mode, type, object id, path) of commit `rev`'s entries at `paths` (with
    `recursive`: every file under them). Empty when `rev` is not a tree-ish here (with
    `check`: `GitError`, as when an object of the tree is missing)."""
    args = [LITERAL, "ls-tree", "-z", "--full-tree", *(["-r"] if recursive else []), rev]
    out = git([*args, "--", *paths], cwd, check=check)
    entries = []
    for entry in _decode(out).split("\0"):
        meta, tab, path = entry.partition("\t")
        parts = meta.split(" ")
        if tab and len(parts) == 3:
            entries.append((parts[0], parts[1], parts[2], path))
    return entries


def index_entries(paths: Sequence[str], cwd: Path) -> list[tuple[str, str, str]]:
    """(mode, object id, path) of the index's stage-0 files under `paths`."""
    out = git([LITERAL, "ls-files", "-s", "-z", "--", *paths], cwd)
    entries = []
    for entry in _decode(out).split("\0"):
        meta, tab, path = entry.partition("\t")
        parts = meta.split(" ")
        if tab and len(parts) == 3 and parts[2] == "0":
            entries.append((parts[0], parts[1], path))
    return entries


def ls_files(paths: Sequence[str], cwd: Path, rev: str | None = None) -> list[str]:
    """Tracked files under `paths`: in the index (rev None) or in commit `rev`."""
    if rev is None:
        out = git([LITERAL, "ls-files", "-z", "--", *paths], cwd)
    else:
        out = git([LITERAL, "ls-tree", "-r", "-z", "--name-only", rev, "--", *paths], cwd)
    return [p for p in _decode(out).split("\0") if p]


def worktree_files(cwd: Path) -> list[str]:
    """Files of the work tree git would see: tracked ones still present, and untracked
    ones that are not ignored."""
    out = git([LITERAL, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd)
    names = dict.fromkeys(p for p in _decode(out).split("\0") if p)
    return [p for p in names if os.path.lexists(cwd / p)]


SYMLINK_MODE = "120000"


def ls_index(paths: Sequence[str], cwd: Path) -> list[tuple[str, str]]:
    """(mode, path) of the index's files under `paths` (mode `120000`: a symlink)."""
    out = git([LITERAL, "ls-files", "-s", "-z", "--", *paths], cwd)
    entries = []
    for entry in _decode(out).split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            entries.append((meta.split(" ", 1)[0], path))
    return entries


def _split_name(name: str) -> tuple[str | None, str]:
    """(revision, path) of an object name `<rev>:path`; revision None for `:path`."""
    rev, sep, path = name.partition(":")
    if not sep:
        raise ValueError(f"object name {name!r} is not `<rev>:<path>` or `:<path>`")
    return (rev or None), path


def object_ids(names: Iterable[str], cwd: Path) -> dict[str, str]:
    """The blob id of every name that names a blob (`:path`, `<rev>:path`); names that
    name nothing, a tree or a submodule are left out. One listing per revision."""
    wanted: dict[str | None, dict[str, list[str]]] = {}
    for name in names:
        rev, path = _split_name(name)
        wanted.setdefault(rev, {}).setdefault(path, []).append(name)
    ids: dict[str, str] = {}
    for rev, by_path in wanted.items():
        paths = [p for p in by_path if p]
        if not paths:
            continue
        if rev is None:
            blobs = [(oid, p) for mode, oid, p in index_entries(paths, cwd) if mode != "160000"]
        else:
            blobs = [
                (oid, p) for _, kind, oid, p in tree_entries(paths, cwd, rev) if kind == "blob"
            ]
        for oid, path in blobs:
            for name in by_path.get(path, ()):
                ids[name] = oid
    return ids


def _is_oid(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _batch_request(oids: Sequence[str]) -> bytes:
    for oid in oids:
        if not _is_oid(oid):  # only ids ever go on a line
            raise ValueError(f"not an object id: {oid!r}")
    return "".join(oid + "\n" for oid in oids).encode("ascii")


def read_blobs(oids: Iterable[str], cwd: Path) -> dict[str, bytes | None]:
    """Contents of blobs by object id (None where missing or not a blob)."""
    return read_objects(oids, cwd, "blob")


def read_objects(oids: Iterable[str], cwd: Path, kind: str) -> dict[str, bytes | None]:
    """Contents of objects of type `kind` by id (None where missing or of another type)."""
    oids = list(dict.fromkeys(oids))
    if not oids:
        return {}
    out = git(["cat-file", "--batch"], cwd, input=_batch_request(oids))
    result: dict[str, bytes | None] = {}
    pos = 0
    for oid in oids:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode("ascii", "replace")
        pos = end + 1
        parts = header.split(" ")
        if len(parts) != 3 or parts[0] != oid:
            result[oid] = None  # `<oid> missing`
            continue
        size = int(parts[2])
        result[oid] = out[pos : pos + size] if parts[1] == kind else None
        pos += size + 1
    return result


def cat_files(names: Iterable[str], cwd: Path) -> dict[str, bytes | None]:
    """Contents of objects named like `:path` or `HEAD:path` (None where missing)."""
    names = list(dict.fromkeys(names))
    if not names:
        return {}
    ids = object_ids(names, cwd)
    blobs = read_blobs(ids.values(), cwd)
    return {name: blobs.get(ids[name]) if name in ids else None for name in names}


def parse_tree(data: bytes, oid_bytes: int = 20) -> list[tuple[str, str, str]]:
    """(mode, name, hex object id) of each entry of a raw tree object (`<mode> <name>NUL`
    then the raw id, `oid_bytes` long: 20 for SHA-1, 32 for SHA-256). Names come back as
    `_decode` gives them; a truncated entry ends the list (a damaged object is never
    read past its end)."""
    entries = []
    pos, end = 0, len(data)
    while pos < end:
        space = data.find(b" ", pos)
        nul = data.find(b"\0", space + 1) if space >= 0 else -1
        if space < 0 or nul < 0 or nul + 1 + oid_bytes > end:
            break
        mode = data[pos:space].decode("ascii", "replace")
        name = _decode(data[space + 1 : nul])
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
        self._proc = subprocess.Popen(
            ["git", "cat-file", "--batch"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_env(),
        )

    def read(self, names: Iterable[str]) -> dict[str, bytes | None]:
        """Contents of objects named like `:path` or `HEAD:path` (None where missing)."""
        names = list(dict.fromkeys(names))
        if not names:
            return {}
        ids = object_ids(names, self._cwd)
        blobs = self.read_blobs(ids.values())
        return {name: blobs.get(ids[name]) if name in ids else None for name in names}

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
            for oid in chunk:
                line = stdout.readline()
                if not line.endswith(b"\n"):
                    raise GitError("git cat-file", "exited early")
                parts = line[:-1].decode("ascii", "replace").split(" ")
                if len(parts) != 3 or parts[0] != oid:
                    result[oid] = None  # `<oid> missing`
                    continue
                size = int(parts[2])
                data = stdout.read(size + 1)[:size]
                result[oid] = data if parts[1] == kind else None
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


def safe_relpath(path: str) -> bool:
    """A path from a git listing that stays inside the directory it is written under: no
    empty, `.`, `..` or `.git` component, not absolute, no NUL (a hostile tree object can
    hold entries that git itself would never check out)."""
    if not path or path.startswith("/") or "\0" in path:
        return False
    return all(part not in ("", ".", "..") and part.lower() != ".git" for part in path.split("/"))


def materialize(paths: Sequence[str], dest: Path, cwd: Path, rev: str | None = None) -> None:
    """Write the index's (or commit `rev`'s) version of `paths` under `dest`. Symbolic
    links are left out: sources never follow them (`doc/sources.py`), and a link's target
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
    return kind == "blob" and mode != SYMLINK_MODE and safe_relpath(path)


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


def config_get(key: str, cwd: Path) -> str | None:
    out = git(["config", "--get", key], cwd, check=False).decode().strip()
    return out or None


def config_get_all(key: str, cwd: Path) -> list[str]:
    """Every value of a multi-valued git config key (the user's and the repository's)."""
    out = git(["config", "--get-all", key], cwd, check=False)
    return [v for v in _decode(out).split("\n") if v.strip()]


def first_parent(sha: str, cwd: Path) -> str | None:
    """The first parent of commit `sha` (None for a root commit)."""
    out = git(["rev-parse", "--verify", "-q", f"{sha}^1^{{commit}}"], cwd, check=False)
    parent = out.decode("ascii", "replace").strip()
    return parent if _is_oid(parent) else None


def all_commits(cwd: Path) -> list[tuple[str, str]]:
    """(commit, root tree) of every commit reachable from any ref or from HEAD, parents
    before children (`rev-list --all --reverse --topo-order`); empty before the first
    commit."""
    out = git(["rev-list", "--all", "--reverse", "--topo-order", "--format=%T"], cwd)
    lines = out.decode("ascii", "replace").split("\n")
    commits = []
    for header, tree in zip(lines[0::2], lines[1::2], strict=False):
        sha = header.removeprefix("commit ")
        if header.startswith("commit ") and _is_oid(sha) and _is_oid(tree):
            commits.append((sha, tree))
    return commits


@dataclass(frozen=True)
class PathCommit:
    """A commit of `path_history`: the blob each watched path has after it, where it
    changed it (None: deleted)."""

    sha: str
    changed: dict[str, str | None]


def path_history(paths: Sequence[str], cwd: Path, rev: str, limit: int | None) -> list[PathCommit]:
    """The first-parent commits from `rev` that change any of `paths`, newest first, with
    the blob each changed path has after the commit. One `git log --raw -z`; only commit
    ids and the watched paths' NUL-terminated names are parsed, never free text."""
    if not _is_oid(rev):
        raise ValueError(f"not an object id: {rev!r}")
    args = [LITERAL, "log", "--first-parent", "--no-renames", "--no-abbrev", "--raw", "-z"]
    args += ["--format=%x00%H", *([f"-n{limit}"] if limit is not None else []), rev, "--"]
    tokens = _decode(git([*args, *paths], cwd)).split("\0")
    watched = set(paths)
    commits: list[PathCommit] = []
    expect_path = False
    blob: str | None = None
    for token in tokens:
        if expect_path:  # a path: NUL-terminated, taken as it is
            if token in watched and commits:
                commits[-1].changed[token] = blob
            expect_path = False
            continue
        text = token.lstrip("\n")
        if text.startswith(":"):  # `:<old mode> <new mode> <old id> <new id> <status>`
            meta = text.split(" ")
            new = meta[3] if len(meta) >= 5 else ""
            blob = new if _is_oid(new) and set(new) != {"0"} else None  # None: deleted
            expect_path = True
        elif _is_oid(text):
            commits.append(PathCommit(text, {}))
    return commits


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: tuple[str, ...]
    author: str
    email: str
    time: int
    subject: str


def commit_info(shas: Iterable[str], cwd: Path) -> dict[str, CommitInfo]:
    """Author, time, parents and subject of each commit (from its object, not a format)."""
    out: dict[str, CommitInfo] = {}
    for sha, raw in read_objects(shas, cwd, "commit").items():
        if raw is not None:
            out[sha] = _parse_commit(sha, raw)
    return out


def _parse_commit(sha: str, raw: bytes) -> CommitInfo:
    head, _, message = raw.partition(b"\n\n")
    parents: list[str] = []
    author, email, when = "", "", 0
    for index, line in enumerate(head.split(b"\n")):
        key, _, value = line.partition(b" ")
        if key == b"parent":
            # as git reads it: parents directly after the tree line, object ids only
            oid = value.decode("ascii", "replace")
            if index == len(parents) + 1 and _is_oid(oid):
                parents.append(oid)
        elif key == b"author" and not author:
            text = value.decode("utf-8", "replace")
            name, _, rest = text.partition(" <")
            email, _, stamp = rest.partition("> ")
            author = name
            with contextlib.suppress(ValueError):
                when = int(stamp.split(" ")[0])
    subject = message.decode("utf-8", "replace").split("\n", 1)[0].strip()
    return CommitInfo(sha, tuple(parents), author, email, when, subject)


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
