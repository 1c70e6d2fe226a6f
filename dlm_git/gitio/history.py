"""Commits and their history: parents, every commit, a path's changes, who and when.

Invariants:
- git answers about the objects themselves (`process.child_env`: no replace refs, no
  grafts), so a parent, a history or an author is that of the commit's own object.
- Only commit ids and NUL-terminated path names are parsed from git's output, never free
  text; a commit's author and parents come from its raw object, read as git reads it
  (parents directly after the tree line, object ids only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dlm_git.gitio.objects import read_objects
from dlm_git.gitio.process import LITERAL, decode, git, is_oid


def first_parent(sha: str, cwd: Path) -> str | None:
    """The first parent of commit `sha` (None for a root commit)."""
    out = git(["rev-parse", "--verify", "-q", f"{sha}^1^{{commit}}"], cwd, check=False)
    parent = out.decode("ascii", "replace").strip()
    return parent if is_oid(parent) else None


def all_commits(cwd: Path) -> list[tuple[str, str]]:
    """(commit, root tree) of every commit reachable from any ref or from HEAD, parents
    before children (`rev-list --all --reverse --topo-order`); empty before the first
    commit."""
    out = git(["rev-list", "--all", "--reverse", "--topo-order", "--format=%T"], cwd)
    lines = out.decode("ascii", "replace").split("\n")
    commits = []
    for header, tree in zip(lines[0::2], lines[1::2], strict=False):
        sha = header.removeprefix("commit ")
        if header.startswith("commit ") and is_oid(sha) and is_oid(tree):
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
    if not is_oid(rev):
        raise ValueError(f"not an object id: {rev!r}")
    args = [LITERAL, "log", "--first-parent", "--no-renames", "--no-abbrev", "--raw", "-z"]
    args += ["--format=%x00%H", *([f"-n{limit}"] if limit is not None else []), rev, "--"]
    tokens = decode(git([*args, *paths], cwd)).split("\0")
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
            blob = new if is_oid(new) and set(new) != {"0"} else None  # None: deleted
            expect_path = True
        elif is_oid(text):
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
            if index == len(parents) + 1 and is_oid(oid):
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
