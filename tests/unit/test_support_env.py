"""The tests' subprocess environment (`tests/support/env.py`) is immune to the user's own
configuration: a hostile `~/.gitconfig` (a failing `core.hooksPath`, a template directory
with a failing hook, signing on, another identity and first branch) and a DVC global
config in `$XDG_CONFIG_HOME` change nothing a test's git or dvc does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.env import VENV_BIN, run
from tests.support.gitrepo import git

FAILING_HOOK = '#!/bin/sh\necho "the user\'s hook ran" >> "{marker}"\nexit 1\n'


def _hook(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FAILING_HOOK.format(marker=marker), "utf-8")
    path.chmod(0o755)


@pytest.fixture
def hostile_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The parent environment of a user whose global git and DVC config would change every
    test (as a shell that never ran the test session's setup); the marker file each of
    the user's hooks appends to is `<home>/hooks-ran`."""
    home = tmp_path / "home"
    marker = home / "hooks-ran"
    for name in ("pre-commit", "commit-msg"):
        _hook(home / "hooks" / name, marker)
        _hook(home / "template" / "hooks" / name, marker)
    (home / ".gitconfig").write_text(
        f"[core]\n\thooksPath = {home / 'hooks'}\n"
        f"[init]\n\ttemplateDir = {home / 'template'}\n\tdefaultBranch = trunk\n"
        "[commit]\n\tgpgsign = true\n"
        "[user]\n\tname = Leaked User\n\temail = leaked@example.invalid\n",
        "utf-8",
    )
    dvc_config = home / ".config" / "dvc" / "config"
    dvc_config.parent.mkdir(parents=True)
    dvc_config.write_text("[core]\n    remote = leaked\n", "utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for key in (
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
        "DVC_GLOBAL_CONFIG_DIR",
        "DVC_SYSTEM_CONFIG_DIR",
    ):
        monkeypatch.delenv(key, raising=False)
    return home


def _plain_git(cwd: Path, *args: str) -> str:
    """git under the parent environment as it is (what a test got before the support env)."""
    proc = subprocess.run(["git", *args], cwd=cwd, env=dict(os.environ), capture_output=True)
    return proc.stdout.decode()


def test_the_hostile_home_is_live_in_the_parent_environment(hostile_home: Path) -> None:
    """The fixture's config really reaches a plain git and dvc (so the tests below can
    fail)."""
    assert _plain_git(hostile_home, "config", "--global", "core.hooksPath").strip() == str(
        hostile_home / "hooks"
    )
    proc = subprocess.run(
        [str(VENV_BIN / "dvc"), "config", "--global", "--list"],
        cwd=hostile_home,
        env=dict(os.environ),
        capture_output=True,
        text=True,
    )
    assert "core.remote=leaked" in proc.stdout.splitlines(), proc.stdout + proc.stderr


def test_a_users_git_config_never_reaches_a_test_repository(
    hostile_home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "file.txt").write_text("a commit the user's hooks would refuse\n", "utf-8")
    git(repo, "add", "file.txt")
    git(repo, "commit", "-q", "-m", "through every hook git runs")  # no --no-verify
    assert not (hostile_home / "hooks-ran").exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()  # not the user's template
    assert git(repo, "log", "-1", "--format=%an <%ae> %G?").strip() == (
        "dlm-git tests <tests@dlm-git.invalid> N"
    )
    assert git(repo, "branch", "--show-current").strip() == "master"
    origins = git(repo, "config", "--list", "--show-origin")
    assert str(hostile_home) not in origins, origins


def test_a_users_dvc_config_never_reaches_a_test_repository(
    hostile_home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    run([VENV_BIN / "dvc", "init", "-q"], repo)
    config = run([VENV_BIN / "dvc", "config", "--list", "--show-origin"], repo).stdout
    assert "leaked" not in config and str(hostile_home) not in config, config
