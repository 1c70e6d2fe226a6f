"""The pre-commit hook refuses a commit whose records are stale: a `.dlm` or a source file
edited (or added) without retraining; it lets a retrained document through, and says
nothing when no document is touched. Every refusal leaves HEAD where it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gitrepo import git, head
from tests.support.hookrepo import (
    DLM,
    DOC,
    LOCK,
    MANIFEST,
    SOURCE,
    commit,
    edit_dlm,
    passed,
    read,
    refused,
    write,
)

pytestmark = pytest.mark.slow

PIPELINE_FIX = (
    "run `dvc repro`, or `dvc commit` after a `dlm-git train` by hand, and stage the results"
)
"""The fix of a stale record in a DVC project: a training by hand alone leaves dvc.lock
behind (`tests/integration/hooks/test_hook_hand_training.py`), so it is never offered alone."""


def test_nothing_concerning_a_document_is_silent(repo: Path) -> None:
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    proc = commit(repo)
    passed(proc, repo, before)
    assert proc.stderr == ""
    assert proc.stdout == ""


# --------------------------------------------------------------------------- stale record


def test_edited_dlm_committed_without_retraining_is_refused(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    err = refused(commit(repo), repo, before)
    assert (
        f"dlm-git: ERROR {DOC}: doc.sha256: {DLM} changed since it was trained"
        " (manifest.json is stale) "
        f"({PIPELINE_FIX})"
    ) in err
    assert "dlm-git: 1 error(s), 0 warning(s) in 1 document(s): commit refused" in err
    # The refused commit left the index as it was: the edit is still staged.
    assert git(repo, "diff", "--cached", "--name-only").split() == [DLM]


def test_retrained_and_committed_passes(retrained_repo: Path) -> None:
    repo = retrained_repo
    before = head(repo)
    # Only the .dlm staged, the retrained outputs left out: still the stale record.
    git(repo, "add", DLM)
    err = refused(commit(repo), repo, before)
    assert "manifest.json is stale" in err
    # Everything `dvc repro` wrote staged: the commit goes through, silently.
    git(repo, "add", "-A")
    staged = git(repo, "diff", "--cached", "--name-only").split()
    assert {DLM, LOCK, MANIFEST, "dvc.lock"} <= set(staged)
    proc = commit(repo)
    passed(proc, repo, before)
    assert proc.stderr == ""


def test_source_file_edit_without_retraining_is_refused(repo: Path) -> None:
    before = head(repo)
    with open(repo / SOURCE, "a", encoding="utf-8") as fh:
        fh.write("A new fact the adapter never saw.\n")
    err = refused(commit(repo, SOURCE), repo, before)  # `git commit <path>`
    assert (
        f"dlm-git: ERROR {DOC}: sources.root: staged sources differ from those manifest.json"
        f" was trained on (changed: {SOURCE})"  # named as `git status` names it
    ) in err


def test_new_source_file_is_refused(repo: Path) -> None:
    before = head(repo)
    write(repo, f"{DOC}/notes/extra.txt", "matched by the include pattern\n")
    err = refused(commit(repo), repo, before)
    assert "staged sources differ" in err


def test_unmatched_file_in_a_source_dir_passes(repo: Path) -> None:
    before = head(repo)
    write(repo, f"{DOC}/notes/image.bin", "not *.md or *.txt: not a source\n")
    passed(commit(repo), repo, before)
