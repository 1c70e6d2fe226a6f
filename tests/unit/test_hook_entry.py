"""Every git hook ends in one line, never a traceback (`dlm_git.hooks.entry.run_hook`).

Each hook entry as git runs it (`python -m dlm_git.hooks.<hook>`), on a real failure of
each kind a user can act on: a `DlmGitError` (run outside a git work tree) and an
`OSError` (its working directory removed under it). Either way: exit 1, exactly one
`dlm-git: ERROR` line on stderr, nothing on stdout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import run, subprocess_env
from tests.support.gitrepo import git

HOOKS = ["pre_commit", "pre_merge_commit", "pre_push"]


@pytest.mark.parametrize("hook", HOOKS)
def test_outside_a_work_tree_the_hook_says_so_in_one_line(tmp_path: Path, hook: str) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    proc = run(
        [sys.executable, "-m", f"dlm_git.hooks.{hook}"],
        plain,
        check=False,
        input="",
        GIT_CEILING_DIRECTORIES=str(tmp_path),
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dlm-git: ERROR ") and "not inside a git work tree" in lines[0]


@pytest.mark.parametrize("hook", HOOKS)
def test_a_working_directory_removed_under_the_hook_is_one_line(tmp_path: Path, hook: str) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m dlm_git.hooks.{hook}'
    proc = run(["sh", "-c", script, sys.executable], tmp_path, check=False, input="")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.splitlines() == [
        "dlm-git: ERROR dlm-git: No such file or directory"
        " (hint: a file or directory disappeared while in use; restore it and re-run)"
    ]


def test_pre_push_reads_ref_names_that_are_not_utf8(git_repo: Path) -> None:
    """git passes ref names as bytes, and a ref may be named in any encoding: the hook
    reads only the object ids from its stdin, whatever the locale's decoder would make of
    the names (a strict UTF-8 decoder here)."""
    (git_repo / "f").write_text("f\n")
    git(git_repo, "add", "f")
    git(git_repo, "commit", "-qm", "f")
    sha = git(git_repo, "rev-parse", "HEAD").strip().encode()
    line = b"refs/heads/caf\xe9 " + sha + b" refs/heads/caf\xe9 " + b"0" * 40 + b"\n"
    proc = subprocess.run(
        [sys.executable, "-m", "dlm_git.hooks.pre_push", "origin", "x"],
        cwd=git_repo,
        input=line,
        capture_output=True,
        env=subprocess_env(PYTHONIOENCODING="utf-8:strict"),
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
