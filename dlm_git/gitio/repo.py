"""The repository around a working directory, and its configuration.

Invariants:
- Where the work tree, the git directory and the hooks are is git's answer
  (`rev-parse`), never a path dlm-git guesses (`core.hooksPath`, worktrees and
  `GIT_DIR` honoured).
- A configuration value is read as git reads it: a boolean only through `git config
  --type=bool` (`config_bool`), so `yes`, `on`, `1`, `2`, `TRUE` and a key with no value
  mean what they mean to git, and a value git refuses is a one-line error naming the key.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from dlm_git.gitio.process import GitError, decode, git, run_git


def toplevel(cwd: Path) -> Path:
    out = git(["rev-parse", "--show-toplevel"], cwd, check=False).decode().strip()
    if not out:
        raise GitError(str(cwd), "not inside a git work tree", "run `git init` first")
    return Path(out)


def hooks_path(cwd: Path) -> Path:
    """Where git looks for hooks (`core.hooksPath` honoured), as an absolute path."""
    return git_path("hooks", cwd)


def git_path(name: str, cwd: Path) -> Path:
    """`name` inside the repository's git directory (`git rev-parse --git-path`), absolute:
    machine-local state that is never part of the work tree."""
    out = git(["rev-parse", "--git-path", name], cwd, check=False).decode().strip()
    if not out:
        raise GitError(str(cwd), "not a git repository", "run `git init` first")
    path = Path(out)
    return path if path.is_absolute() else cwd / path


def toplevel_and_head(
    cwd: Path, also: Sequence[Sequence[str]] = ()
) -> tuple[Path, str | None, list[str]]:
    """The work tree's root, HEAD's commit (None before the first commit), and git's
    answers to `also` (more `rev-parse` questions, each answered in one line, relative
    paths relative to `cwd`), in one call."""
    asked = [arg for question in also for arg in question]
    args = ["rev-parse", "--show-toplevel", *asked, "--verify", "--quiet", "HEAD^{commit}"]
    proc = run_git(args, cwd)
    lines = decode(proc.stdout).splitlines()
    if not lines or not lines[0]:
        raise GitError(str(cwd), "not inside a git work tree", "run `git init` first")
    answers, rest = lines[1 : 1 + len(also)], lines[1 + len(also) :]
    head = rest[0].strip() if proc.returncode == 0 and rest else None
    return Path(lines[0]), head or None, answers


def resolve_commit(rev: str, cwd: Path) -> str | None:
    out = git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd, check=False)
    sha = out.decode().strip()
    return sha or None


_UNKNOWN = "?"


def staged_paths(cwd: Path, head: str | None = _UNKNOWN) -> list[str]:
    """Paths whose index entry differs from HEAD (all of them before the first commit),
    as `git diff-index --cached` names them. `head`: HEAD's commit if already resolved
    (None: there is no HEAD yet). The pre-commit hook reads the same answer from the two
    listings it takes anyway (`hooks.pre_commit.staged_in`); its tests hold it to this."""
    if head == _UNKNOWN:
        head = resolve_commit("HEAD", cwd)
    against = head if head else _empty_tree(cwd)
    out = git(["diff-index", "--cached", "--name-only", "--no-renames", "-z", against], cwd)
    return [p for p in decode(out).split("\0") if p]


def _empty_tree(cwd: Path) -> str:
    return git(["hash-object", "-t", "tree", "--stdin"], cwd, input=b"").decode().strip()


# --------------------------------------------------------------------------- configuration


def config_get(key: str, cwd: Path) -> str | None:
    out = git(["config", "--get", key], cwd, check=False).decode().strip()
    return out or None


def config_get_all(key: str, cwd: Path) -> list[str]:
    """Every value of a multi-valued git config key (the user's and the repository's)."""
    out = git(["config", "--get-all", key], cwd, check=False)
    return [v for v in decode(out).split("\n") if v.strip()]


def config_bool(key: str, cwd: Path) -> bool | None:
    """Boolean `key` as git reads it (`git config --type=bool`), None when it is not set:
    true for `true`/`yes`/`on`, a non-zero number or a key with no value; false for
    `false`/`no`/`off`/`0` or an empty value (any case). A value git cannot read as a
    boolean is a `GitError` naming the key, its value and the fix."""
    proc = run_git(["config", "--type=bool", "--get", key], cwd)
    answer = proc.stdout.strip()
    if proc.returncode == 0 and answer in (b"true", b"false"):
        return answer == b"true"
    if proc.returncode == 1 and not answer:
        return None  # not set
    value = config_get(key, cwd) or ""
    raise GitError(
        f"git config {key}",
        f"{value!r:.60} is not a boolean",
        f"set it to true or false: git config {key} true",
    )


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
