"""One side of a comparison: a commit, or the work tree as it is on disk.

Invariants:
- A commit is read through git objects only (`gitio`, `revdoc`), never checked out: its
  document is materialized into a caller's temp directory, its adapter copied out of the
  DVC cache into one (fetched from a DVC remote only when asked: `dlm_git.verify.fetch`).
- The work tree is read as it is: files on disk (tracked, or untracked and not ignored),
  the adapter directory beside the document if there is one, else the one its dvc.lock
  names in the cache. Nothing on either side is written to.
- A revision is validated before git sees it: a bad one is a `UsageError` naming it.
- Whatever a side cannot provide is a reason (a string), never an exception: a diff
  reports what it could not compare.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlm_git import gitio, revdoc
from dlm_git.docset import PARAMS_NAME, Tree, documents, read_params
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.fsutil import MAX_RECORD_BYTES, NotRegularFile, read_regular
from dlm_git.layout import ADAPTER_DIR
from dlm_git.manifest.records import ADAPTER_WEIGHTS
from dlm_git.safeparse import TooDeep

if TYPE_CHECKING:
    from dlm_git.doc.load import LoadedDocument
    from dlm_git.verify.fetch import FetchFrom

WORKTREE_LABEL = "work tree"


@dataclass(frozen=True)
class Side:
    root: Path
    commit: str | None
    """None: the work tree."""
    label: str

    def describe(self) -> str:
        return self.label if self.commit is None else f"{self.label} ({self.commit[:12]})"

    def read(self, path: str) -> bytes | None:
        return self.read_many([path])[path]

    def read_many(self, paths: list[str]) -> dict[str, bytes | None]:
        if self.commit is None:
            return {p: _read_file(self.root / p) for p in paths}
        blobs = gitio.cat_files([f"{self.commit}:{p}" for p in paths], self.root)
        return {p: blobs.get(f"{self.commit}:{p}") for p in paths}

    def documents(self) -> list[str]:
        """The document directories of this side (`dlm_git.docset`'s rule)."""
        if self.commit is None:
            listed = gitio.worktree_files(self.root)
        else:
            listed = gitio.ls_files(["."], self.root, rev=self.commit)
        try:
            params = read_params(self.read(PARAMS_NAME))
        except TooDeep as exc:
            raise DlmGitError(f"{self.describe()}:{PARAMS_NAME}", exc.problem) from None
        return documents(params, Tree.from_paths(listed))

    def load(self, doc_rel: str, tmp: Path) -> LoadedDocument | str:
        """The document with its expanded sources, or why it cannot be loaded."""
        from dlm_git.doc.load import load_document
        from dlm_git.doc.sources import Outside

        try:
            if self.commit is None:
                return load_document(self.root / doc_rel)
            dlm = revdoc.materialize(self.root, doc_rel, self.commit, tmp)
            if dlm is None:
                return "no single .dlm in the document directory"
            # a commit holds no file outside the repository: this machine's are not its
            return load_document(dlm, Outside.SKIP)
        except DlmGitError as exc:
            return self._named(exc.one_line(), tmp)
        except OSError as exc:
            return self._named(f"{exc.strerror or exc}", tmp)

    def _named(self, text: str, tmp: Path) -> str:
        """A message about a materialized file, naming it `<rev>:<path>` (no temp dir)."""
        return text.replace(f"{tmp}{os.sep}", f"{self.label}:") if self.commit else text

    def adapter_weights(self, doc_rel: str, tmp: Path, fetch: FetchFrom | None) -> Path | str:
        """The adapter weights file of this side, or why it is not available here
        (`fetch`: fetched from there first where the DVC cache lacks it)."""
        from dlm_git.dvcfiles import DvcRecordError
        from dlm_git.verify.commit import copy_out

        prefix = revdoc.prefix_of(doc_rel)
        if self.commit is None:
            here = self.root / f"{prefix}{ADAPTER_DIR}" / ADAPTER_WEIGHTS
            if here.is_file():
                return here
        dvc_lock = self.read("dvc.lock")
        notes: list[str] = []
        if fetch is not None and self.commit is not None:
            from dlm_git.verify.fetch import fetch_outs

            notes = fetch_outs(self.root, dvc_lock, doc_rel, [ADAPTER_DIR], fetch)
        try:
            missing = copy_out(self.root, dvc_lock, doc_rel, ADAPTER_DIR, tmp)
        except DvcRecordError as exc:
            return f"malformed record: {exc.one_line()}"
        if missing is not None:
            return "; ".join([missing, *notes])  # with why a --fetch did not bring it
        weights = tmp / ADAPTER_WEIGHTS
        return weights if weights.is_file() else f"the adapter has no {ADAPTER_WEIGHTS}"


def resolve_side(root: Path, rev: str | None) -> Side:
    """`rev` as a side: None is the work tree; anything else must name a commit."""
    if rev is None:
        return Side(root, None, WORKTREE_LABEL)
    if not rev or rev.startswith("-") or any(c in rev for c in "\0\n\r"):
        raise UsageError("diff", f"not a revision: {rev!r}", "name a commit, e.g. HEAD~1")
    sha = gitio.resolve_commit(rev, root)
    if sha is None:
        raise UsageError("diff", f"unknown revision {rev!r}", "name a commit, e.g. HEAD~1")
    return Side(root, sha, rev)


def _read_file(path: Path) -> bytes | None:
    """The work tree's file (None: absent, or not a regular file: never waited on)."""
    try:
        return read_regular(path, MAX_RECORD_BYTES)
    except (OSError, NotRegularFile):
        return None
