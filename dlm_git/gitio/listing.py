"""What the index and a commit's tree hold: listings of paths and their object ids.

Invariants:
- A file name never travels on a line: paths are listed NUL-terminated (`ls-tree -z`,
  `ls-files -z`) and given as literal pathspecs (`--literal-pathspecs`: no globs, no
  magic). A name holding a newline, a carriage return or `:0:` cannot split an answer.
- One parser (`_records`) reads both listings git writes as `<meta> TAB <path> NUL`
  (`ls-tree -z` and `ls-files -s -z`); an entry of another shape is skipped.
- Callers name objects `:path` (the index, stage 0) or `<rev>:path` (a commit's tree),
  with `path` relative to the repository root, and pass the repository root as `cwd`;
  a batch of names costs one `ls-files`/`ls-tree` per revision (`object_ids`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from dlm_git.gitio.process import LITERAL, decode, git

SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"


def _records(out: bytes, fields: int) -> list[tuple[str, ...]]:
    """(*meta, path) of each `<meta> TAB <path>` entry of a NUL-terminated listing whose
    meta has `fields` space-separated fields."""
    entries = []
    for entry in decode(out).split("\0"):
        meta, tab, path = entry.partition("\t")
        parts = meta.split(" ")
        if tab and len(parts) == fields:
            entries.append((*parts, path))
    return entries


def tree_entries(
    paths: Sequence[str],
    cwd: Path,
    rev: str,
    recursive: bool = False,
    check: bool = False,
    *,
    elsewhere: bool = False,
) -> list[tuple[str, str, str, str]]:
    """(mode, type, object id, path) of commit `rev`'s entries at `paths` (with
    `recursive`: every file under them). Empty when `rev` is not a tree-ish here (with
    `check`: `GitError`, as when an object of the tree is missing); `elsewhere` as for
    `process.run_git`."""
    args = [LITERAL, "ls-tree", "-z", "--full-tree", *(["-r"] if recursive else []), rev]
    out = git([*args, "--", *paths], cwd, check=check, elsewhere=elsewhere)
    return [(mode, kind, oid, path) for mode, kind, oid, path in _records(out, 3)]


def _index_listing(paths: Sequence[str], cwd: Path) -> list[tuple[str, ...]]:
    """(mode, object id, stage, path) of every index entry under `paths`, every stage."""
    return _records(git([LITERAL, "ls-files", "-s", "-z", "--", *paths], cwd), 3)


def index_entries(paths: Sequence[str], cwd: Path) -> list[tuple[str, str, str]]:
    """(mode, object id, path) of the index's stage-0 files under `paths`."""
    listing = _index_listing(paths, cwd)
    return [(mode, oid, path) for mode, oid, stage, path in listing if stage == "0"]


def ls_index(paths: Sequence[str], cwd: Path) -> list[tuple[str, str]]:
    """(mode, path) of the index's files under `paths`, every stage (mode `120000`: a
    symlink)."""
    return [(mode, path) for mode, _, _, path in _index_listing(paths, cwd)]


def ls_files(paths: Sequence[str], cwd: Path, rev: str | None = None) -> list[str]:
    """Tracked files under `paths`: in the index (rev None) or in commit `rev`."""
    if rev is None:
        out = git([LITERAL, "ls-files", "-z", "--", *paths], cwd)
    else:
        out = git([LITERAL, "ls-tree", "-r", "-z", "--name-only", rev, "--", *paths], cwd)
    return [p for p in decode(out).split("\0") if p]


def worktree_files(cwd: Path) -> list[str]:
    """Files of the work tree git would see: tracked ones still present, and untracked
    ones that are not ignored."""
    out = git([LITERAL, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd)
    names = dict.fromkeys(p for p in decode(out).split("\0") if p)
    return [p for p in names if os.path.lexists(cwd / p)]


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
            blobs = [
                (oid, p) for mode, oid, p in index_entries(paths, cwd) if mode != SUBMODULE_MODE
            ]
        else:
            blobs = [
                (oid, p) for _, kind, oid, p in tree_entries(paths, cwd, rev) if kind == "blob"
            ]
        for oid, path in blobs:
            for name in by_path.get(path, ()):
                ids[name] = oid
    return ids
