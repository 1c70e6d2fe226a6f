"""`dlm_git.selfid`, specified on real directories and real git checkouts: the digest names
the package's files exactly (one changed byte changes it; where and when they were copied
does not), the commit is known only for `dlm_git/` at the top of a git work tree, and an
identity read back from stored bytes is checked as hostile input."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from dlm_git import __version__
from dlm_git.merkle import merkle_root
from dlm_git.selfid import PACKAGE as RUNNING
from dlm_git.selfid import Identity, checkout_state, from_json, identify, package_digest
from tests.support.gitrepo import commit_all, git, head, init_repo, write_files

TINY = {"__init__.py": "VERSION = 1\n", "core.py": "def f():\n    return 1\n", "data/a.txt": "a\n"}


def tiny_package(parent: Path) -> Path:
    package = parent / "dlm_git"
    write_files(package, TINY)
    return package


def copy_running(dest: Path) -> Path:
    """A copy of the package this test imports, without Python's own output."""
    shutil.copytree(RUNNING, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_the_rule_as_documented(tmp_path: Path) -> None:
    package = tiny_package(tmp_path)
    leaves = [
        b"f" + rel.encode() + b"\0" + hashlib.sha256(text.encode()).digest()
        for rel, text in sorted(TINY.items())
    ]
    assert package_digest(package) == (merkle_root(leaves), 3)


def test_the_same_files_give_the_same_digest_wherever_and_whenever(tmp_path: Path) -> None:
    first = copy_running(tmp_path / "a" / "dlm_git")
    second = tmp_path / "b" / "dlm_git"
    shutil.copytree(first, second)  # other inodes, times and location
    for path in second.rglob("*"):
        os.utime(path, (1, 1))
        path.chmod(0o700 if path.is_dir() else 0o600)
    (second / "__pycache__").mkdir()
    (second / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"compiled")
    digest, files = package_digest(first)
    assert package_digest(second) == (digest, files)
    assert files == sum(1 for p in first.rglob("*") if p.is_file())


def _flip_byte(p: Path) -> None:
    data = bytearray((p / "core.py").read_bytes())
    data[-2] ^= 1
    (p / "core.py").write_bytes(bytes(data))


def _crlf(p: Path) -> None:
    path = p / "core.py"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))


EDITS = {
    "a byte of a module": _flip_byte,
    "a byte of package data": lambda p: (p / "data/a.txt").write_bytes(b"b\n"),
    "a new file": lambda p: (p / "extra.py").write_bytes(b""),
    "a new file beside the bytecode": lambda p: (p / "__init__.pyi").write_bytes(b""),
    # Python imports a sourceless `.pyc` outside `__pycache__/`: `data/` becomes a package
    "a sourceless bytecode module": lambda p: (p / "data/__init__.pyc").write_bytes(b"x"),
    "a sourceless module shadowing a source": lambda p: (p / "core.pyc").write_bytes(b"x"),
    "a removed file": lambda p: (p / "data/a.txt").unlink(),
    "a renamed file": lambda p: (p / "core.py").rename(p / "kernel.py"),
    "CRLF line endings": _crlf,
}


@pytest.mark.parametrize("edit", list(EDITS.values()), ids=list(EDITS))
def test_any_change_to_the_files_changes_the_digest(tmp_path: Path, edit: object) -> None:
    package = tiny_package(tmp_path)
    before = package_digest(package)
    edit(package)  # type: ignore[operator]
    assert package_digest(package)[0] != before[0]


def test_what_is_no_readable_file_is_a_leaf_of_its_own_never_waited_on(tmp_path: Path) -> None:
    package = tiny_package(tmp_path)
    before, count = package_digest(package)
    os.mkfifo(package / "pipe")
    with_fifo, _ = package_digest(package)  # a FIFO is never opened: no hang
    (package / "pipe").unlink()
    (package / "dangling").symlink_to(tmp_path / "nowhere")
    with_link, _ = package_digest(package)
    assert len({before, with_fifo, with_link}) == 3


def test_links_are_followed_as_import_follows_them(tmp_path: Path) -> None:
    package = tiny_package(tmp_path)
    plain = package_digest(package)
    outside = tmp_path / "elsewhere.py"
    outside.write_bytes((package / "core.py").read_bytes())
    (package / "core.py").unlink()
    (package / "core.py").symlink_to(outside)
    assert package_digest(package) == plain
    outside.write_bytes(b"def f():\n    return 2\n")
    assert package_digest(package) != plain
    (package / "data" / "loop").symlink_to(package)  # a link back up: walked once
    assert package_digest(package)[1] == 3


def test_a_checkout_names_its_commit_and_whether_the_files_differ(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "checkout")
    package = tiny_package(repo)
    write_files(repo, {".gitignore": "__pycache__/\n*.pyc\n*.so\n", "README": "x\n"})
    sha = commit_all(repo, "dlm-git")
    assert checkout_state(package) == (sha, False)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"compiled")
    (repo / "README").write_text("outside the package\n", "utf-8")
    assert checkout_state(package) == (sha, False)
    for change, undo in [
        (lambda: _flip_byte(package), lambda: git(repo, "checkout", "--", "dlm_git")),
        (lambda: (package / "new.py").write_bytes(b""), lambda: (package / "new.py").unlink()),
        (lambda: (package / "fast.so").write_bytes(b""), lambda: (package / "fast.so").unlink()),
        (lambda: (package / "core.pyc").write_bytes(b""), lambda: (package / "core.pyc").unlink()),
        (lambda: (package / "core.py").unlink(), lambda: git(repo, "checkout", "--", "dlm_git")),
    ]:
        change()
        assert checkout_state(package) == (sha, True)
        undo()
        assert checkout_state(package) == (sha, False)


def _committed(tmp_path: Path) -> tuple[Path, Path, str]:
    repo = init_repo(tmp_path / "checkout")
    package = tiny_package(repo)
    return repo, package, commit_all(repo, "dlm-git")


@pytest.mark.parametrize("bit", ["--assume-unchanged", "--skip-worktree"])
def test_dirty_is_read_from_the_bytes_not_from_the_index_bits(tmp_path: Path, bit: str) -> None:
    repo, package, sha = _committed(tmp_path)
    git(repo, "update-index", bit, "dlm_git/core.py")
    _flip_byte(package)
    assert git(repo, "status", "--porcelain", "--", "dlm_git") == ""  # git: clean
    assert checkout_state(package) == (sha, True)


def test_end_of_line_conversion_is_dirty_the_bytes_that_run_differ(tmp_path: Path) -> None:
    repo, package, sha = _committed(tmp_path)
    git(repo, "config", "core.autocrlf", "true")
    (package / "core.py").unlink()
    git(repo, "checkout", "--", "dlm_git")  # written back with CRLF, as on Windows
    assert b"\r\n" in (package / "core.py").read_bytes()
    assert git(repo, "status", "--porcelain", "--", "dlm_git") == ""  # git: clean
    assert checkout_state(package) == (sha, True)


def test_a_link_in_heads_tree_is_its_text_so_a_followed_link_is_dirty(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "checkout")
    package = tiny_package(repo)
    (package / "alias.py").symlink_to("core.py")
    sha = commit_all(repo, "dlm-git with a link")
    assert checkout_state(package) == (sha, True)  # disk: core.py's bytes; HEAD: `core.py`


def test_identify_writes_nothing_in_the_checkout_not_even_the_index(tmp_path: Path) -> None:
    repo, package, sha = _committed(tmp_path)
    for path in package.rglob("*"):
        os.utime(path, (1e9, 1e9))  # new stat data: `git status` would rewrite the index
    index = repo / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    assert identify(package).dirty is False
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    assert not (repo / ".git" / "index.lock").exists()


def test_the_callers_repository_variables_never_name_the_verifiers_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = init_repo(tmp_path / "checkout")
    package = tiny_package(repo)
    sha = commit_all(repo, "dlm-git")
    other = init_repo(tmp_path / "verified")
    write_files(other, {"doc.dlm": "x\n"})
    commit_all(other, "the repository being verified")
    git(other, "add", "doc.dlm")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # as inside a hook of `other`
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    assert checkout_state(package) == (sha, False)
    assert head(other) != sha


@pytest.mark.parametrize("where", ["no repository", "below the top", "untracked at the top"])
def test_no_commit_is_claimed_for_a_package_elsewhere(tmp_path: Path, where: str) -> None:
    if where == "no repository":
        package = tiny_package(tmp_path / "plain")
    elif where == "below the top":  # e.g. a wheel in a virtual environment in a work tree
        repo = init_repo(tmp_path / "project")
        package = tiny_package(repo / ".venv" / "site-packages")
        commit_all(repo, "everything, the package too")
    else:
        repo = init_repo(tmp_path / "project")
        write_files(repo, {"README": "x\n"})
        commit_all(repo, "no package")
        package = tiny_package(repo)
    assert checkout_state(package) == (None, None)
    assert identify(package).commit is None and identify(package).dirty is None


def test_identify_names_the_version_digest_and_commit(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "checkout")
    package = tiny_package(repo)
    sha = commit_all(repo, "dlm-git")
    digest, files = package_digest(package)
    assert identify(package) == Identity(__version__, digest, files, sha, False)
    assert identify(package).to_json() == {
        "name": "dlm-git",
        "version": __version__,
        "digest": digest,
        "files": files,
        "commit": sha,
        "dirty": False,
    }
    assert identify(package).describe() == (
        f"dlm-git {__version__}, digest {digest[:16]}, commit {sha[:12]}"
    )


GOOD = Identity("0.1.0", "ab" * 32, 190, "cd" * 20, True)


def test_an_identity_reads_back_from_its_json() -> None:
    assert from_json(GOOD.to_json()) == GOOD
    unknown_commit = Identity("0.1.0", "ab" * 32, 190, None, None)
    assert from_json(unknown_commit.to_json()) == unknown_commit
    assert from_json({**GOOD.to_json(), "commit": "cd" * 32}) is not None  # SHA-256 git


BAD = {
    "not an object": [],
    "no digest": {k: v for k, v in GOOD.to_json().items() if k != "digest"},
    "a short digest": {**GOOD.to_json(), "digest": "ab" * 31},
    "an upper-case digest": {**GOOD.to_json(), "digest": "AB" * 32},
    "a commit of no git": {**GOOD.to_json(), "commit": "cd" * 21},
    "a dirty flag of text": {**GOOD.to_json(), "dirty": "no"},
    "dirty without a commit": {**GOOD.to_json(), "commit": None},
    "files as a flag": {**GOOD.to_json(), "files": True},
    "negative files": {**GOOD.to_json(), "files": -1},
    "an empty version": {**GOOD.to_json(), "version": ""},
    "a long name": {**GOOD.to_json(), "name": "x" * 65},
}


@pytest.mark.parametrize("value", list(BAD.values()), ids=list(BAD))
def test_anything_else_is_no_identity(value: object) -> None:
    assert from_json(value) is None


OPENS = """
import collections, os, sys
from pathlib import Path
import dlm_git.gitio, dlm_git.gitio.process  # imported before: their files are not counted
from dlm_git.selfid import identify
package = os.path.realpath(sys.argv[1])
opened = collections.Counter()
def count(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(package + os.sep):
            opened[path] += 1
sys.addaudithook(count)
found = identify(Path(package))
print(found.commit is not None, found.dirty, found.files, sorted(set(opened.values())))
"""
"""Counts every open of a file below the package while its identity is computed (an
audit hook, in a process of its own: one cannot be removed)."""


def test_each_file_is_read_once_so_digest_and_dirty_judge_the_same_bytes(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    repo = init_repo(tmp_path / "checkout")
    package = tiny_package(repo)
    commit_all(repo, "dlm-git")
    _flip_byte(package)  # dirty: every file's blob id is computed
    proc = subprocess.run(
        [sys.executable, "-c", OPENS, str(package)], capture_output=True, text=True, check=True
    )
    assert proc.stdout.split() == ["True", "True", "3", "[1]"], proc.stdout + proc.stderr


def test_a_large_file_in_the_package_is_hashed_never_held(tmp_path: Path) -> None:
    """A stray 256 MiB file (sparse: no disk) below the package is hashed in chunks: the
    memory Python allocates while identifying the package stays far below its size
    (`tracemalloc`'s peak; a process's peak RSS would also count the parent it was
    forked from)."""
    import tracemalloc

    package = tiny_package(tmp_path)
    with open(package / "stray.bin", "wb") as f:
        f.truncate(256 << 20)
    tracemalloc.start()
    try:
        found = identify(package)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.files == 4 and peak < 16 << 20, peak


def test_no_git_to_start_is_no_commit_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity never fails: where git cannot be started, the files still have their
    digest and no commit is claimed."""
    repo = init_repo(tmp_path / "checkout")
    package = tiny_package(repo)
    commit_all(repo, "dlm-git")
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    found = identify(package)
    assert (found.commit, found.dirty) == (None, None)
    assert (found.digest, found.files) == package_digest(package)
