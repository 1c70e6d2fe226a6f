"""What the pre-commit hook judges: the index being committed (`git commit -a`, `git commit
<path>`, partial staging), never the work tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gitrepo import git, head
from tests.support.hookrepo import DLM, SOURCE, commit, edit_dlm, passed, read, refused, write

pytestmark = pytest.mark.slow


def test_commit_all_checks_the_worktree_changes(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    err = refused(commit(repo, "-a"), repo, before)
    assert "manifest.json is stale" in err
    assert git(repo, "diff", "--cached", "--name-only") == ""  # the real index is untouched


def test_commit_path_of_the_dlm_is_refused(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    err = refused(commit(repo, DLM), repo, before)
    assert "manifest.json is stale" in err


def test_commit_path_of_an_unrelated_file_passes(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    write(repo, "README.md", "# Changed\n", stage=False)
    proc = commit(repo, "README.md")
    passed(proc, repo, before)
    assert proc.stderr == ""
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["README.md"]
    assert git(repo, "status", "--porcelain").split() == ["M", DLM]


def test_partial_staging_checks_the_index_not_the_worktree(repo: Path) -> None:
    before = head(repo)
    trained_text = read(repo, DLM)
    write(repo, DLM, edit_dlm(trained_text.decode("utf-8")))  # stale edit staged
    write(repo, DLM, trained_text, stage=False)  # worktree back to the trained bytes
    assert git(repo, "diff", "--name-only").split() == [DLM]
    err = refused(commit(repo), repo, before)
    assert "manifest.json is stale" in err


def test_worktree_edits_with_nothing_staged_for_the_doc_pass(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    with open(repo / SOURCE, "a", encoding="utf-8") as fh:
        fh.write("unstaged\n")
    write(repo, "README.md", "# Changed\n")
    proc = commit(repo)
    passed(proc, repo, before)
    assert proc.stderr == ""
