"""The pre-merge-commit hook: an honest merge passes silently; a merge that brings in a
stale record is refused, as the pre-commit hook would refuse the same commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.env import run
from tests.support.gitrepo import git, head
from tests.support.hookrepo import DLM, DOC, commit, edit_dlm, passed, read, write

pytestmark = pytest.mark.slow


def _branch(repo: Path) -> str:
    return git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()


def _diverge(repo: Path, base: str) -> str:
    """Back on `base`, an unrelated commit (through the hook), so the merge is a real one."""
    git(repo, "checkout", "-q", base)
    before = head(repo)
    write(repo, "README.md", "# The base branch moved on\n")
    passed(commit(repo), repo, before)
    return head(repo)


def merge(repo: Path, branch: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run(["git", "merge", "-q", "--no-edit", *args, branch], repo, check=False)


def test_honest_merge_passes(retrained_repo: Path) -> None:
    """A branch that retrained its edited .dlm (committed through the hook), merged into
    a base branch that moved on: pre-merge-commit runs the pre-commit checks on the merge
    result and lets it through, silently."""
    repo = retrained_repo
    base = _branch(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "add", "-A")
    before = head(repo)
    passed(commit(repo), repo, before)
    feature = head(repo)
    moved = _diverge(repo, base)
    proc = merge(repo, "feature")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    assert git(repo, "rev-parse", "HEAD^1", "HEAD^2").split() == [moved, feature]


def test_stale_merge_is_refused(repo: Path) -> None:
    """A branch whose .dlm was edited without retraining (past its own pre-commit hook,
    e.g. by a collaborator without hooks) merges without conflicts: git runs no
    pre-commit hook for that merge, only pre-merge-commit, which refuses it."""
    base = _branch(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    assert commit(repo, "--no-verify").returncode == 0
    moved = _diverge(repo, base)
    proc = merge(repo, "feature")
    assert proc.returncode != 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("dlm-git:")]
    assert lines == [
        f"dlm-git: ERROR {DOC}: doc.sha256: {DLM} changed since it was trained"
        " (manifest.json is stale)"
        " (run `dvc repro`, or `dvc commit` after a `dlm-git train` by hand, and stage the"
        " results)",
        "dlm-git: 1 error(s), 0 warning(s) in 1 document(s): merge refused",
    ], proc.stderr
    assert head(repo) == moved
    # the refused merge is left uncommitted; retraining and `git commit` would finish it
    git(repo, "merge", "--abort")
    # without our pre-merge-commit hook (only pre-commit), the same merge went through
    (repo / ".git" / "hooks" / "pre-merge-commit").unlink()
    proc = merge(repo, "feature")
    assert proc.returncode == 0 and "dlm-git" not in proc.stderr, proc.stderr
    assert head(repo) != moved
