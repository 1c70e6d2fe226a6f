"""One side of a comparison: a commit, or the work tree as it is on disk, read as a
`docat.TreeAt` (the one type for a tree at a revision).

Invariants:
- A commit is read through git objects only (`docat`), never checked out: its document
  is materialized into a caller's temp directory, its adapter copied out of the DVC cache
  into one (fetched from a DVC remote only when asked: `dlm_git.verify.fetch`).
- The work tree is read as it is: files on disk (tracked, or untracked and not ignored),
  the adapter directory beside the document if there is one, else the one its dvc.lock
  names in the cache. Nothing on either side is written to.
- A revision is validated before git sees it: a bad one is a `UsageError` naming it.
- Whatever a side cannot provide is a reason (a string), never an exception: a diff
  reports what it could not compare.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git import gitio
from dlm_git.docat import DocAt, Rev, TreeAt, copy_out
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.layout import ADAPTER_DIR, ADAPTER_WEIGHTS

if TYPE_CHECKING:
    from dlm_git.doc.load import LoadedDocument
    from dlm_git.verify.fetch import FetchFrom

WORKTREE_LABEL = "work tree"


def resolve_side(root: Path, rev: str | None) -> TreeAt:
    """`rev` as a side: None is the work tree; anything else must name a commit."""
    if rev is None:
        return TreeAt(root, Rev.WORKTREE, WORKTREE_LABEL)
    if not rev or rev.startswith("-") or any(c in rev for c in "\0\n\r"):
        raise UsageError("diff", f"not a revision: {rev!r}", "name a commit, e.g. HEAD~1")
    sha = gitio.resolve_commit(rev, root)
    if sha is None:
        raise UsageError("diff", f"unknown revision {rev!r}", "name a commit, e.g. HEAD~1")
    return TreeAt(root, sha, rev)


def commit_of(side: TreeAt) -> str | None:
    """The side's commit (None: the work tree)."""
    return side.where if isinstance(side.where, str) else None


def describe(side: TreeAt) -> str:
    commit = commit_of(side)
    return side.label if commit is None else f"{side.label} ({commit[:12]})"


def load(doc: DocAt, tmp: Path) -> LoadedDocument | str:
    """The document with its expanded sources, or why it cannot be loaded."""
    from dlm_git.doc.load import load_document
    from dlm_git.doc.sources import Outside

    side = doc.tree
    try:
        if side.where is Rev.WORKTREE:
            return load_document(side.root / doc.rel)
        placed = doc.materialize(tmp)
        if placed is None:
            return "no single .dlm in the document directory"
        # a commit holds no file outside the repository: this machine's are not its
        return load_document(placed[0], Outside.SKIP)
    except DlmGitError as exc:
        return _named(side, exc.one_line(), tmp)
    except OSError as exc:
        return _named(side, f"{exc.strerror or exc}", tmp)


def _named(side: TreeAt, text: str, tmp: Path) -> str:
    """A message about a materialized file, naming it `<rev>:<path>` (no temp dir)."""
    return text if commit_of(side) is None else text.replace(f"{tmp}{os.sep}", f"{side.label}:")


def adapter_weights(doc: DocAt, tmp: Path, fetch: FetchFrom | None) -> Path | str:
    """The adapter weights file of this side, or why it is not available here
    (`fetch`: fetched from there first where the DVC cache lacks it)."""
    from dlm_git.dvcfiles import DvcRecordError

    side = doc.tree
    if side.where is Rev.WORKTREE:
        here = side.root / f"{doc.prefix}{ADAPTER_DIR}" / ADAPTER_WEIGHTS
        if here.is_file():
            return here
    notes: list[str] = []
    if fetch is not None and commit_of(side) is not None:
        from dlm_git.verify.fetch import fetch_outs

        notes = fetch_outs(side.root, doc.dvc_lock, doc.rel, [ADAPTER_DIR], fetch)
    try:
        missing = copy_out(side.root, doc.dvc_lock, doc.rel, ADAPTER_DIR, tmp)
    except DvcRecordError as exc:
        return f"malformed record: {exc.one_line()}"
    if missing is not None:
        return "; ".join([missing, *notes])  # with why a --fetch did not bring it
    weights = tmp / ADAPTER_WEIGHTS
    return weights if weights.is_file() else f"the adapter has no {ADAPTER_WEIGHTS}"
