"""Every git child process dlm-git starts, and how its output is decoded.

Invariants:
- Plain `git` subprocesses, so `GIT_INDEX_FILE` (which git sets inside hooks for
  `git commit -a` and `git commit <path>`) and `GIT_DIR` are honoured exactly as git
  does; no library that might read a different index.
- Every git child runs in `child_env()`: replace refs (`refs/replace/*`, `git replace
  --graft`) and grafts (`info/grafts`, `GIT_GRAFT_FILE`) switched off, and the pathspec
  modes git refuses beside `--literal-pathspecs` dropped (`CLEARED`); a child asked about
  dlm-git's own checkout (`elsewhere`, `dlm_git.selfid`) also without the caller's
  repository variables (`LOCAL_VARS`). Nothing else starts git: `run_git` (run to
  completion) and `start_git` (a streaming child) are the one door.
- git's bytes become `str` one way (`decode`: UTF-8, names that are not UTF-8
  round-trip), and only object ids (`is_oid`) are ever put on a request line.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from dlm_git.errors import DlmGitError


class GitError(DlmGitError):
    """A git command failed."""


NO_GRAFT_FILE = os.path.join(os.devnull, "dlm-git-no-grafts")
"""A path that cannot exist (under a device file, not a directory): git then reads no
graft file at all, and prints no deprecation hint for one."""

REWRITES_OFF = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": NO_GRAFT_FILE}
"""What every git child process runs with: no replace refs (the variable `git
--no-replace-objects` sets), and no graft file in place of `<git dir>/info/grafts`
(git 2.39 reads that one even with replace refs off)."""

CLEARED = ("GIT_REPLACE_REF_BASE", "GIT_GLOB_PATHSPECS", "GIT_ICASE_PATHSPECS")
"""Variables dropped from a git child's environment: the replace-ref namespace (moot with
replace refs off), and the pathspec modes git refuses beside `--literal-pathspecs` (every
listing would fail, and an honest commit would look empty)."""

LITERAL = "--literal-pathspecs"
"""git's global option that takes every pathspec as a literal path (no `*`, no `:(...)`)."""


LOCAL_VARS = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
)
"""git's repository-local variables (`git rev-parse --local-env-vars`), less the rewrites
`REWRITES_OFF` sets and the `git -c` settings (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`):
dropped for a child that asks about a repository found from its `cwd` alone
(`elsewhere`), as git drops them for a submodule. A hook's `GIT_DIR` and `GIT_INDEX_FILE`
name the repository being checked, never dlm-git's own checkout."""


def child_env(elsewhere: bool = False) -> dict[str, str]:
    """The environment of every git child process dlm-git starts: the caller's, with
    git's object rewriting switched off (`REWRITES_OFF`) and `CLEARED` removed; with
    `elsewhere`, `LOCAL_VARS` removed too."""
    dropped = CLEARED + LOCAL_VARS if elsewhere else CLEARED
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(REWRITES_OFF)
    return env


def run_git(
    args: Sequence[str], cwd: Path, input: bytes | None = None, *, elsewhere: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """`git <args>` in `cwd`, run to completion in `child_env(elsewhere)`; stdout and
    stderr kept."""
    return subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, env=child_env(elsewhere)
    )


def start_git(args: Sequence[str], cwd: Path) -> subprocess.Popen[bytes]:
    """`git <args>` in `cwd` as a streaming child in `child_env()`: stdin and stdout are
    pipes, stderr is dropped."""
    return subprocess.Popen(
        ["git", *args],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )


def git(
    args: Sequence[str],
    cwd: Path,
    input: bytes | None = None,
    check: bool = True,
    *,
    elsewhere: bool = False,
) -> bytes:
    """stdout of `git <args>` (in `child_env(elsewhere)`); with `check`, a failure is a
    `GitError` naming the git command (`git ls-tree`, past options such as `LITERAL`)
    with git's last line."""
    proc = run_git(args, cwd, input, elsewhere=elsewhere)
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        command = next((a for a in args if not a.startswith("-")), args[0])
        raise GitError(f"git {command}", msg[-1] if msg else f"exit {proc.returncode}")
    return proc.stdout


def decode(out: bytes) -> str:
    """git's bytes as str; names that are not UTF-8 round-trip (surrogateescape)."""
    return out.decode("utf-8", "surrogateescape")


def is_oid(text: str) -> bool:
    """A full object id in lower-case hex (SHA-1 or SHA-256)."""
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
