"""Hash-level verification of a document as it is in the working tree (the pipeline's
`verify` stage): files on disk against manifest.json, dlm.lock and dvc.lock.

Invariant: the work tree is one more revision (`DocAt` of `Rev.WORKTREE`) run through the
same check list as a commit (`hashlevel.check_document`); its records are read through
`fsutil` (a FIFO is one line, never a wait), its sources outside the repository are read
(this machine's files are its inputs), and what it lacks (the adapter not pulled, the
base) is ABSENT: `CANNOT_VERIFY`, never a pass.
"""

from __future__ import annotations

from pathlib import Path

from dlm_git.docat import Rev, TreeAt
from dlm_git.layout import DocLayout, find_document, repo_root_of
from dlm_git.verify.hashlevel import Run, check_document
from dlm_git.verify.report import DocReport


def verify_worktree(
    target: Path, *, use_dvc: bool = True, tiny_dir: Path | None = None
) -> DocReport:
    doc_path = find_document(target)
    directory = DocLayout(doc_path).directory
    repo_root = repo_root_of(doc_path)
    rel = directory.resolve().relative_to(repo_root).as_posix()
    run = Run(repo_root, tiny_dir=tiny_dir, use_dvc=use_dvc)
    with TreeAt(repo_root, Rev.WORKTREE) as tree:
        # nothing is written for the work tree (it is read in place)
        return check_document(tree.doc(rel), repo_root / ".dlm-git-unused", run)
