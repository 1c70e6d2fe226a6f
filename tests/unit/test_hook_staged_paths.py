"""The pre-commit hook's staged paths (`pre_commit.staged_in`, read from the index's and
HEAD's listings, issue 28) are exactly the ones git names (`git diff-index --cached
--name-only`, `gitio.staged_paths`), in git's order, for every kind of staged change on a
real repository: edits, additions, deletions, mode and type changes, a submodule link,
an intent-to-add entry, names that are not UTF-8 or sort differently as text and as
bytes, another index (`GIT_INDEX_FILE`), a sparse and a split index, and the first
commit. A HEAD tree or an index made by hand (a path twice, or out of git's order) hides
no path that the commit rewrites."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dlm_git import gitio
from dlm_git.hooks.pre_commit import _trees, staged_in
from tests.support.gitrepo import git, hand_tree


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


def test_a_sparse_index_is_read_file_by_file(committed: Path) -> None:
    """`ls-files -s` lists the files under a sparse directory entry (`x/`), never the
    entry itself: nothing outside the cone is named staged."""
    (committed / "x" / "y").mkdir(parents=True)
    (committed / "x" / "y" / "f").write_bytes(b"f\n")
    git(committed, "add", "x")
    git(committed, "commit", "-qm", "two")
    git(committed, "sparse-checkout", "init", "--cone", "--sparse-index")
    git(committed, "sparse-checkout", "set", "d")
    assert "x/" in git(committed, "ls-files", "--sparse")  # the index really is sparse
    (committed / "d" / "c").write_bytes(b"c2\n")
    git(committed, "add", "d/c")
    assert agree(committed) == ["d/c"]


def test_a_split_index_is_read_whole(committed: Path) -> None:
    git(committed, "config", "core.splitIndex", "true")
    git(committed, "update-index", "--split-index")
    edit(committed)
    add_and_delete(committed)
    assert agree(committed) == ["a", "d/c", "new"]


def blob(repo: Path, data: bytes) -> str:
    (repo / "blob").write_bytes(data)
    oid = git(repo, "hash-object", "-w", "blob").strip()
    (repo / "blob").unlink()
    return oid


@pytest.mark.parametrize("shape", ["a path twice", "out of order"])
def test_a_hand_made_head_tree_hides_no_path_the_commit_rewrites(
    git_repo: Path, shape: str
) -> None:
    """HEAD's tree names `a` twice (git's `HEAD:a` finds the first entry, the index holds
    the last) or lists `b` before `a`. Path by path the index equals the last entry HEAD
    lists, yet the commit rewrites HEAD's tree and git names `a`: so does the hook."""
    old, new, other = (blob(git_repo, data) for data in (b"old\n", b"new\n", b"b\n"))
    twice = [("100644", b"a", old), ("100644", b"a", new)]
    swapped = [("100644", b"b", other), ("100644", b"a", new)]
    tree = hand_tree(git_repo, twice if shape == "a path twice" else swapped)
    git(git_repo, "update-ref", "HEAD", git(git_repo, "commit-tree", tree, "-m", "hand").strip())
    for oid, name in ((new, "a"), (other, "b")) if shape == "out of order" else ((new, "a"),):
        git(git_repo, "update-index", "--add", "--cacheinfo", f"100644,{oid},{name}")
    staged = ours(git_repo)
    assert "a" in staged and set(staged) == set(gitio.staged_paths(git_repo))


def test_a_path_listed_twice_reads_as_git_reads_it(git_repo: Path) -> None:
    """HEAD's hand-made tree names `a` twice: the hook's view of HEAD (`TreeAt.entries`)
    is the first entry, the one `git show HEAD:a` (and `verify`) reads, not the last."""
    old, new = (blob(git_repo, data) for data in (b"old\n", b"new\n"))
    tree = hand_tree(git_repo, [("100644", b"a", old), ("100644", b"a", new)])
    git(git_repo, "update-ref", "HEAD", git(git_repo, "commit-tree", tree, "-m", "hand").strip())
    assert git(git_repo, "rev-parse", "HEAD:a").strip() == old
    head = git(git_repo, "rev-parse", "HEAD").strip()
    with _trees(git_repo, head) as (_, at_head):
        assert at_head is not None
        assert at_head.entries["a"] == ("100644", old)
        assert not at_head.in_git_order


def swap_first_two_entries(index: Path) -> None:
    """Rewrite a version-2 index with its first two entries swapped (checksum renewed):
    an index out of git's order, which git reads without complaint."""
    data = index.read_bytes()[:-20]
    sizes = []
    at = 12
    for _ in range(2):
        name_length = int.from_bytes(data[at + 60 : at + 62], "big") & 0xFFF
        sizes.append((62 + name_length + 8) // 8 * 8)
        at += sizes[-1]
    first, second = data[12 : 12 + sizes[0]], data[12 + sizes[0] : at]
    swapped = data[:12] + second + first + data[at:]
    index.write_bytes(swapped + hashlib.sha1(swapped).digest())


def test_a_hand_made_index_out_of_order_hides_no_path(git_repo: Path) -> None:
    """The index lists `b` before `a`, each as HEAD has it: git still names `a` staged
    (its walk meets them out of step), so the hook does."""
    (git_repo / "a").write_bytes(b"a\n")
    (git_repo / "b").write_bytes(b"b\n")
    git(git_repo, "add", "a", "b")
    git(git_repo, "commit", "-qm", "one")
    swap_first_two_entries(git_repo / ".git" / "index")
    assert git(git_repo, "ls-files").split() == ["b", "a"]  # git reads it as it is
    staged = ours(git_repo)
    assert "a" in staged and set(staged) == set(gitio.staged_paths(git_repo))


def test_names_that_sort_apart_as_text_and_bytes_are_in_gits_order(committed: Path) -> None:
    """git's listings of `odd_names` are in byte order, which is not their text order:
    both are read as git wrote them, with no second look at what is staged (`diff-index`)."""
    odd_names(committed)
    git(committed, "commit", "-qm", "odd")
    edit(committed)
    head = gitio.resolve_commit("HEAD", committed)
    with _trees(committed, head) as (index, at_head):
        assert at_head is not None
        texts = list(at_head.entries)
        assert texts != sorted(texts)  # text order differs here
        assert index.in_git_order and at_head.in_git_order
