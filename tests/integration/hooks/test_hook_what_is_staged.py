"""What the pre-commit hook judges: the index being committed (`git commit -a`, `git commit
<path>`, partial staging), never the work tree; and every path the commit rewrites, even
where HEAD's tree was made by hand to hide one (`pre_commit.staged_in`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import hook
from tests.support.gitrepo import git, hand_tree, head, tree_entries_of
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


def test_a_head_tree_naming_the_dlm_twice_hides_no_edit(repo: Path) -> None:
    """HEAD's `notes/` tree names the .dlm twice: the trained text first (what git's
    `HEAD:notes/notes.dlm`, and so `verify`, reads), an untrained edit last. The index
    holds the edit, equal path by path to HEAD's last entry; yet the commit replaces the
    trained document with it, untrained: refused."""
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    edited = git(repo, "hash-object", "-w", DLM).strip()
    doc = tree_entries_of(repo, "HEAD:notes")
    at = [name for _, name, _ in doc].index(b"notes.dlm")
    doc.insert(at + 1, ("100644", b"notes.dlm", edited))
    root = [
        (mode, name, hand_tree(repo, doc) if name == b"notes" else oid)
        for mode, name, oid in tree_entries_of(repo, "HEAD^{tree}")
    ]
    made = git(repo, "commit-tree", hand_tree(repo, root), "-p", "HEAD", "-m", "by hand")
    git(repo, "update-ref", "HEAD", made.strip())
    git(repo, "update-index", "--cacheinfo", f"100644,{edited},{DLM}")
    before = head(repo)
    err = refused(commit(repo), repo, before)
    assert "manifest.json is stale" in err


def test_a_head_tree_git_cannot_list_is_one_line_naming_the_listing(git_repo: Path) -> None:
    """HEAD's tree holds an entry with no name: git cannot list it, so nothing staged can
    be judged. One line naming the git command that failed and why, exit 1, no traceback."""
    (git_repo / "a").write_bytes(b"a\n")
    oid = git(git_repo, "hash-object", "-w", "a").strip()
    tree = hand_tree(git_repo, [("100644", b"", oid), ("100644", b"a", oid)])
    git(
        git_repo, "update-ref", "HEAD", git(git_repo, "commit-tree", tree, "-m", "nameless").strip()
    )
    git(git_repo, "add", "a")
    result = hook(git_repo, "pre_commit")
    assert result.code == 1
    assert result.stderr.startswith("dlm-git: ERROR git ls-tree: fatal: ")  # git's own words
    assert result.stderr.count("\n") == 1, result.stderr
