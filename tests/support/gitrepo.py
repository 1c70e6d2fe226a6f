"""Real git repositories for tests: one `git` runner and one repository builder.

Every test that drives git does it through these (or through `forgery.git`, which adds the
test venv's environment), so a change to how tests call git is made once.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Run git in `repo` and return its stdout (raises on failure); `env` replaces the
    environment (e.g. with `GIT_INDEX_FILE`)."""
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
    ).stdout


def init_repo(repo: Path) -> Path:
    """An empty git work tree at `repo` with a local identity and no signing."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "dlm-git tests")
    git(repo, "config", "user.email", "tests@dlm-git.invalid")
    git(repo, "config", "commit.gpgsign", "false")
    return repo
