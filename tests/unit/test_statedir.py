"""Where machine-local state lives (`dlm_git.statedir`), on real git repositories: in the
git directory, per work tree or shared by all of a repository's work trees; in
`<dir>/.dlm-git` outside git; never through a symbolic link; and reads of regular files
only (`dlm_git.fsutil`), a FIFO refused without blocking."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dlm_git.fsutil import NotRegularFile, digest_regular, read_regular
from dlm_git.statedir import StateDirError, adopt_legacy, make_state_dir, state_dir, state_path
from tests.support.gitrepo import git, init_repo


def test_state_lives_in_the_git_directory(git_repo: Path) -> None:
    assert state_dir(git_repo) == git_repo / ".git" / "dlm-git"
    assert state_dir(git_repo, shared=True) == git_repo / ".git" / "dlm-git"
    assert state_path(git_repo, "x.json") == git_repo / ".git" / "dlm-git" / "x.json"
    assert not (git_repo / ".git" / "dlm-git").exists()  # named, not made


def test_a_linked_worktree_has_its_own_state_and_shares_the_token_cache(
    git_repo: Path, tmp_path: Path
) -> None:
    (git_repo / "f").write_text("x")
    git(git_repo, "add", "f")
    git(git_repo, "commit", "-q", "-m", "one")
    other = tmp_path / "other"
    git(git_repo, "worktree", "add", "-q", str(other))
    own = state_dir(other).resolve()
    assert own == (git_repo / ".git" / "worktrees" / "other" / "dlm-git").resolve()
    assert state_dir(other, shared=True).resolve() == (git_repo / ".git" / "dlm-git").resolve()
    assert make_state_dir(other, "quarantine").resolve() == own / "quarantine"


def test_outside_git_state_is_beside_the_document(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert state_dir(plain) == plain / ".dlm-git" == state_dir(plain, shared=True)


@pytest.mark.parametrize("parts", [(), ("token-cache",)])
def test_a_link_on_the_state_path_is_refused(
    git_repo: Path, tmp_path: Path, parts: tuple[str, ...]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    link = git_repo / ".git" / "dlm-git"
    if parts:
        link.mkdir()
        link = link.joinpath(*parts)
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(StateDirError) as caught:
        make_state_dir(git_repo, "token-cache", "entries", shared=True)
    assert caught.value.subject == str(link) and "symbolic link" in caught.value.message
    assert list(outside.iterdir()) == []


def test_a_link_outside_git_is_refused_too(tmp_path: Path) -> None:
    plain, outside = tmp_path / "plain", tmp_path / "outside"
    plain.mkdir()
    outside.mkdir()
    (plain / ".dlm-git").symlink_to(outside, target_is_directory=True)
    with pytest.raises(StateDirError):
        state_path(plain, "hash-cache.json")


def test_an_older_directory_is_adopted_once_and_only_when_untracked(git_repo: Path) -> None:
    old = git_repo / ".dlm-git" / "token-cache"
    old.mkdir(parents=True)
    (old / "entry").write_text("kept")
    dest = state_path(git_repo, "token-cache", shared=True)
    adopt_legacy(git_repo, "token-cache", dest)
    assert (dest / "entry").read_text() == "kept" and not old.exists()

    brought = init_repo(git_repo.parent / "brought")
    tracked = brought / ".dlm-git" / "token-cache"
    tracked.mkdir(parents=True)
    (tracked / "entry").write_text("a commit's")
    git(brought, "add", "-f", ".dlm-git")
    dest = state_path(brought, "token-cache", shared=True)
    adopt_legacy(brought, "token-cache", dest)
    assert not dest.exists() and (tracked / "entry").is_file()


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_regular(fifo, 100)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)
        else:
            outcome.append(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert outcome, "reading a FIFO blocked"
    assert isinstance(outcome[0], NotRegularFile) and "FIFO" in outcome[0].message
    with pytest.raises(NotRegularFile):
        digest_regular(fifo, "sha256")


def test_limits_and_links(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    assert read_regular(big, 101) == b"x" * 101
    with pytest.raises(NotRegularFile, match="over the 100-byte limit"):
        read_regular(big, 100)
    link = tmp_path / "link"
    link.symlink_to(big)
    assert read_regular(link, 200) == b"x" * 101
    with pytest.raises(NotRegularFile, match="symbolic link"):
        read_regular(link, 200, follow_symlinks=False)
    with pytest.raises(NotRegularFile, match="directory"):
        read_regular(tmp_path, 200)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent", 200)
