"""The pre-push hook's inputs: git's ref lines on stdin, the pre-commit framework's variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.hooks.pre_push import framework_tips, pushed_tips
from tests.support.gitrepo import git

# --------------------------------------------------------------------------- pre-push stdin


def test_pushed_tips() -> None:
    a, b, z = "a" * 40, "b" * 40, "0" * 40
    stdin = "\n".join(
        [
            f"refs/heads/main {a} refs/heads/main {z}",
            f"refs/heads/x {a} refs/heads/x {b}",
            f"(delete) {z} refs/heads/gone {b}",
            f"refs/heads/s256 {'c' * 64} refs/heads/s256 {'0' * 64}",
            f"(delete) {'0' * 64} refs/heads/gone256 {'d' * 64}",
            "garbage",
            "",
        ]
    )
    assert pushed_tips(stdin) == [a, "c" * 64]


def test_framework_tips(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRE_COMMIT_TO_REF", raising=False)
    monkeypatch.delenv("PRE_COMMIT_LOCAL_BRANCH", raising=False)
    assert framework_tips(git_repo) == []
    monkeypatch.setenv("PRE_COMMIT_TO_REF", "0" * 40)
    assert framework_tips(git_repo) == []
    monkeypatch.setenv("PRE_COMMIT_TO_REF", "e" * 40)
    assert framework_tips(git_repo) == ["e" * 40]
    # A push carrying the root commit: pre-commit sets only the local ref.
    monkeypatch.delenv("PRE_COMMIT_TO_REF")
    (git_repo / "a").write_text("a")
    git(git_repo, "add", "a")
    git(git_repo, "commit", "-qm", "root")
    monkeypatch.setenv("PRE_COMMIT_LOCAL_BRANCH", "HEAD")
    assert framework_tips(git_repo) == [git(git_repo, "rev-parse", "HEAD").strip()]
    monkeypatch.setenv("PRE_COMMIT_LOCAL_BRANCH", "refs/heads/nope")
    assert framework_tips(git_repo) == []
