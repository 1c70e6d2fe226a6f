"""Real git repositories for tests: the one `git` runner and the repository builders.

`git()` runs git in the isolated environment of `tests/support/env.py` (as `Forge.git`
and the hook helpers do through it); a test that needs git's raw bytes calls `subprocess`
itself and still inherits that isolation, which tests/conftest.py puts into the test
process's environment for the whole session.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.env import GIT_SETTINGS, run


def git(repo: Path, *args: str, check: bool = True, **env: str) -> str:
    """Run git in `repo` and return its stdout; `env` is added to the isolated environment
    (e.g. `GIT_INDEX_FILE=...`); with `check`, a failure fails the test with git's output."""
    return run(["git", *args], repo, check=check, **env).stdout


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def hand_tree(repo: Path, entries: list[tuple[str, bytes, str]]) -> str:
    """A tree object written byte for byte from (mode, name, object id) `entries`, in the
    order given and never checked (`hash-object --literally`): a name twice, or out of
    git's order, as only a hostile hand makes them (modes as git writes them: `40000`,
    not `ls-tree`'s `040000`). Its id."""
    raw = b"".join(
        f"{mode.lstrip('0')} ".encode() + name + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in entries
    )
    args = ["git", "hash-object", "-t", "tree", "-w", "--literally", "--stdin"]
    return (
        subprocess.run(args, cwd=repo, input=raw, capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )


def tree_entries_of(repo: Path, tree: str) -> list[tuple[str, bytes, str]]:
    """(mode, name, object id) of `tree`'s own entries, in its order (for `hand_tree`)."""
    out = subprocess.run(
        ["git", "ls-tree", "-z", tree], cwd=repo, capture_output=True, check=True
    ).stdout
    entries = []
    for record in out.split(b"\0")[:-1]:
        meta, _, name = record.partition(b"\t")
        mode, _, oid = meta.decode().split(" ")
        entries.append((mode, name, oid))
    return entries


LOCAL_SETTINGS = ("user.name", "user.email", "commit.gpgsign")
"""The session's settings a test repository also keeps in its own config, so that a copy
of it commits the same under any environment."""


def init_repo(repo: Path) -> Path:
    """An empty git work tree at `repo` with the tests' identity and no signing."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    for key in LOCAL_SETTINGS:
        git(repo, "config", key, GIT_SETTINGS[key])
    return repo


def commit_all(repo: Path, message: str) -> str:
    """Stage everything and commit it past any hook (`--no-verify`); the new HEAD."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    return head(repo)


def write_files(repo: Path, files: dict[str, str]) -> None:
    """Write each repository path of `files` with its text (directories made as needed)."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, "utf-8")


def commit_files(repo: Path, files: dict[str, str], message: str = "files") -> str:
    """`write_files`, then `commit_all`; the new HEAD."""
    write_files(repo, files)
    return commit_all(repo, message)
