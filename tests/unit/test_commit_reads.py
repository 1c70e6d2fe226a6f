"""Reading a commit once for all its documents answers exactly as reading it per document:
`gitio.CommitFiles` (one listing, one `cat-file` process) as `ls-tree`/`cat_files`/
`materialize` per path, and `dvcfiles.LockOuts` (dvc.lock parsed and walked once) as
`find_out` over a full parse, errors included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlm_git import gitio
from dlm_git.dvcfiles import DvcRecordError, LockOuts, find_out, lock_outs, parse_dvc_lock
from tests.support.gitrepo import git

# --------------------------------------------------------------------------- dvc.lock

GOOD = "0123456789abcdef0123456789abcdef.dir"
STAGE = "  {name}:\n    outs:\n    - path: {path}\n      md5: {md5}\n"


def lock(*stages: str) -> bytes:
    return ("schema: '2.0'\nstages:\n" + "".join(stages)).encode()


def stage(name: str, path: str, md5: str = GOOD) -> str:
    return STAGE.format(name=name, path=path, md5=md5)


LOCKS = {
    "good": lock(stage("train@a", "a/adapter"), stage("train@b", "b/adapter")),
    "broken stage after a": lock(stage("train@a", "a/adapter"), "  broken: [1]\n"),
    "broken stage before b": lock("  broken: 7\n", stage("train@b", "b/adapter")),
    "outs not a list": lock(stage("train@a", "a/adapter"), "  x:\n    outs: {p: 1}\n"),
    "an out not a mapping": lock("  x:\n    outs:\n    - 3\n", stage("train@a", "a/adapter")),
    "bad md5": lock(stage("train@a", "a/adapter", "not-an-md5")),
    "first without md5": lock(stage("s1", "a/adapter", "''"), stage("s2", "a/adapter")),
    "twice": lock(stage("s1", "a/adapter"), stage("s2", "a/adapter", "f" * 32 + ".dir")),
    "path not text": lock("  x:\n    outs:\n    - path: [a]\n      md5: " + GOOD + "\n"),
    "stages a list": b"stages:\n- a\n",
    "no stages": b"schema: '2.0'\n",
    "not yaml": b"stages: [unclosed\n",
    "not a mapping": b"- a\n",
    "too deep": b"stages: " + b"[" * 100 + b"]" * 100 + b"\n",
}
PATHS = ("a/adapter", "b/adapter", "c/adapter", "a", "")


def answer(find: object) -> object:
    try:
        return find()  # type: ignore[operator]
    except DvcRecordError as exc:
        return ("DvcRecordError", exc.one_line())


@pytest.mark.parametrize("data", LOCKS.values(), ids=LOCKS.keys())
def test_lock_outs_answers_as_find_out_over_the_whole_parse(data: bytes) -> None:
    outs = LockOuts(data)
    for path in PATHS:
        expected = answer(lambda: find_out(parse_dvc_lock(data), path))  # noqa: B023
        assert answer(lambda: outs.find(path)) == expected, path  # noqa: B023
        assert answer(lambda: outs.find(path)) == expected, f"{path}, asked again"  # noqa: B023


def test_lock_outs_are_remembered_by_every_byte() -> None:
    data = LOCKS["good"]
    assert lock_outs(data) is lock_outs(bytes(bytearray(data)))
    other = data.replace(GOOD.encode(), b"f" * 32 + b".dir", 1)
    assert lock_outs(other) is not lock_outs(data)
    found = lock_outs(other).find("a/adapter")
    assert found is not None and found.md5 == "f" * 32 + ".dir"


# --------------------------------------------------------------------------- the commit

NAMES = [
    "a.md",
    "a.md.bak",
    "d001/x",
    "d0011/y",
    "d001/doc.dlm",
    "notes/a.md",
    "notes/sub/b.md",
    "sp ace/z",
    "new\nline/f",
    "top.dlm",
    "deep/" + "a/" * 100 + "f",
    "deep0",
    "deep-er/x",
]
SPECS = [
    ["deep"],
    ["deep/a/a"],
    ["deep/" + "a/" * 100 + "f"],
    ["d001"],
    ["notes"],
    ["."],
    ["a.md"],
    ["notes/", "d001"],
    ["./d001"],
    ["notes/../d001"],
    ["no"],
    ["sp ace"],
    ["notes/sub", "notes"],
    ["new\nline"],
    ["d001/x", "d0011"],
]


@pytest.fixture
def committed(git_repo: Path) -> tuple[Path, str]:
    for name in NAMES:
        (git_repo / name).parent.mkdir(parents=True, exist_ok=True)
        (git_repo / name).write_bytes(f"{name}\n".encode())
    os.symlink("a.md", git_repo / "notes" / "link")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "files")
    return git_repo, git(git_repo, "rev-parse", "HEAD").strip()


def tree_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def test_commit_files_answer_as_git_does_per_path(
    committed: tuple[Path, str], tmp_path: Path
) -> None:
    repo, sha = committed
    with gitio.CommitFiles(sha, repo) as commit:
        assert commit.paths() == gitio.ls_files(["."], repo, rev=sha)
        for specs in SPECS:
            assert commit.named(specs) == gitio.tree_entries(specs, repo, sha, True), specs
        asked = ["a.md", "notes", "nope", "notes/link", "d001/x", "new\nline/f", "a.md"]
        alone = {n: gitio.cat_files([f"{sha}:{n}"], repo)[f"{sha}:{n}"] for n in asked}
        assert commit.read(asked) == alone
        assert commit.read(asked) == alone  # kept blobs answer alike
        for i, specs in enumerate(SPECS):
            once, per_path = tmp_path / f"once{i}", tmp_path / f"per{i}"
            commit.materialize(specs, once)
            gitio.materialize(specs, per_path, repo, rev=sha)
            assert tree_of(once) == tree_of(per_path), specs


def test_commit_files_of_a_missing_tree_is_an_error(committed: tuple[Path, str]) -> None:
    repo, _ = committed
    with gitio.CommitFiles("f" * 40, repo) as commit, pytest.raises(gitio.GitError):
        commit.paths()
