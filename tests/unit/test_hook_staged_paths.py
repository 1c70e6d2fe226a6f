"""The pre-commit hook's staged paths (`pre_commit.staged_in`, read from the index's and
HEAD's listings, issue 28) are exactly the ones git names (`git diff-index --cached
--name-only`, `gitio.staged_paths`), in git's order, for every kind of staged change on a
real repository: edits, additions, deletions, mode and type changes, a submodule link,
an intent-to-add entry, names that are not UTF-8 or sort differently as text and as
bytes, another index (`GIT_INDEX_FILE`) and the first commit."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dlm_git import gitio
from dlm_git.hooks.pre_commit import _trees, staged_in
from tests.support.gitrepo import git


def ours(repo: Path) -> list[str]:
    head = gitio.resolve_commit("HEAD", repo)
    with _trees(repo, head) as (index, at_head):
        return staged_in(index, at_head)


def agree(repo: Path) -> list[str]:
    """The hook's staged paths, after checking them against git's own answer."""
    expected = gitio.staged_paths(repo)
    assert ours(repo) == expected
    return expected


@pytest.fixture
def committed(git_repo: Path) -> Path:
    for name, data in {"a": b"a\n", "b": b"b\n", "d/c": b"c\n", "d/e": b"e\n"}.items():
        (git_repo / name).parent.mkdir(exist_ok=True)
        (git_repo / name).write_bytes(data)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "one")
    return git_repo


def edit(repo: Path) -> None:
    (repo / "a").write_bytes(b"a2\n")
    git(repo, "add", "a")


def add_and_delete(repo: Path) -> None:
    (repo / "new").write_bytes(b"new\n")
    git(repo, "add", "new")
    git(repo, "rm", "-q", "--cached", "d/c")


def mode_change(repo: Path) -> None:
    git(repo, "update-index", "--chmod=+x", "b")


def file_to_link_and_dir(repo: Path) -> None:
    git(repo, "rm", "-q", "-f", "--cached", "b", "d/e")
    (repo / "b").unlink()
    os.symlink("a", repo / "b")
    (repo / "d" / "e").unlink()
    (repo / "d" / "e").mkdir()
    (repo / "d" / "e" / "inner").write_bytes(b"inner\n")
    git(repo, "add", "b", "d/e/inner")


def submodule_link(repo: Path) -> None:
    oid = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{oid},sub")


def intent_to_add(repo: Path) -> None:
    (repo / "later").write_bytes(b"later\n")
    git(repo, "add", "-N", "later")


def odd_names(repo: Path) -> None:
    """Names that sort one way as text and another as bytes: a byte that is not UTF-8
    (read as a surrogate, U+DCF0) before a full-width `！` (U+FF01) as text, after it as
    bytes (0xF0 > 0xEF)."""
    for name in (b"d.x", b"d-x", b"\xf0x", "！".encode(), "é".encode(), b"Z"):
        (repo / os.fsdecode(name)).write_bytes(name + b"\n")
    git(repo, "add", ".")


CHANGES: dict[str, Callable[[Path], None]] = {
    "edit": edit,
    "add and delete": add_and_delete,
    "mode": mode_change,
    "link and directory": file_to_link_and_dir,
    "submodule": submodule_link,
    "intent to add": intent_to_add,
    "odd names": odd_names,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_the_hooks_staged_paths_are_gits(committed: Path, change: str) -> None:
    CHANGES[change](committed)
    assert agree(committed)  # something is staged, and both name the same paths


def test_nothing_staged_is_nothing(committed: Path) -> None:
    (committed / "a").write_bytes(b"changed but not added\n")
    assert agree(committed) == []


def test_every_change_at_once_in_gits_order(committed: Path) -> None:
    for change in CHANGES.values():
        change(committed)
    staged = agree(committed)
    assert staged == sorted(staged, key=os.fsencode) and len(staged) >= 10


def test_before_the_first_commit_everything_is_staged(git_repo: Path) -> None:
    (git_repo / "x").write_bytes(b"x\n")
    (git_repo / "y").write_bytes(b"y\n")
    git(git_repo, "add", ".")
    assert agree(git_repo) == ["x", "y"]


def test_another_index_is_read_as_git_reads_it(
    committed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = committed / ".git" / "other-index"
    git(committed, "read-tree", "HEAD", GIT_INDEX_FILE=str(other))
    (committed / "b").write_bytes(b"b2\n")
    git(committed, "add", "b", GIT_INDEX_FILE=str(other))
    edit(committed)  # the default index stages `a`
    monkeypatch.setenv("GIT_INDEX_FILE", str(other))
    assert agree(committed) == ["b"]
