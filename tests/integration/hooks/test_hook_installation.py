"""`dlm-git hooks install`: chaining an existing hook (and restoring it), `core.hooksPath`,
and living beside `dvc install`."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.support.cli import dlm_git
from tests.support.env import VENV_BIN, run
from tests.support.gitrepo import git, head
from tests.support.hookrepo import DLM, commit, edit_dlm, passed, read, refused, write

pytestmark = pytest.mark.slow


FOREIGN = """#!/bin/sh
echo "$0 ran" >> "{marker}"
exit {code}
"""


def _hook_files(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.endswith(".sample")
    }


def _write_hook(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_existing_hook_is_chained_and_restored(repo: Path, tmp_path: Path) -> None:
    hooks = repo / ".git" / "hooks"
    out = dlm_git(repo, "hooks", "install", "--uninstall", check=True).stdout
    removed = ["pre-commit: removed", "pre-merge-commit: removed", "pre-push: removed"]
    assert out.splitlines() == removed
    marker = tmp_path / "marker"
    foreign = FOREIGN.format(marker=marker, code=0)
    _write_hook(hooks / "pre-commit", foreign)

    out = dlm_git(repo, "hooks", "install", check=True).stdout
    assert "pre-commit: installed" in out and "runs first as pre-commit.dlm-git-chained" in out
    assert (hooks / "pre-commit.dlm-git-chained").read_text("utf-8") == foreign
    installed = _hook_files(hooks)

    # Idempotent: a second install says so and changes nothing.
    out = dlm_git(repo, "hooks", "install", check=True).stdout
    assert out.splitlines() == [
        "pre-commit: already installed",
        "pre-merge-commit: already installed",
        "pre-push: already installed",
    ]
    assert _hook_files(hooks) == installed

    # Both run: the foreign hook first (marker), then ours (refuses the stale edit).
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    passed(commit(repo), repo, before)
    assert marker.read_text().count("ran") == 1
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    refused(commit(repo), repo, before)
    assert marker.read_text().count("ran") == 2

    out = dlm_git(repo, "hooks", "install", "--uninstall", check=True).stdout
    assert out.splitlines() == [
        "pre-commit: removed (restored the previous hook)",
        "pre-merge-commit: removed",
        "pre-push: removed",
    ]
    assert (hooks / "pre-commit").read_text("utf-8") == foreign
    assert not (hooks / "pre-commit.dlm-git-chained").exists()
    restored = _hook_files(hooks)
    out = dlm_git(repo, "hooks", "install", "--uninstall", check=True).stdout
    assert out.splitlines() == [
        "pre-commit: not installed",
        "pre-merge-commit: not installed",
        "pre-push: not installed",
    ]
    assert _hook_files(hooks) == restored
    # Our hook is gone: the stale edit now goes through (only the foreign hook runs).
    passed(commit(repo), repo, before)
    assert marker.read_text().count("ran") == 3


def test_failing_chained_hook_refuses_the_commit(repo: Path, tmp_path: Path) -> None:
    hooks = repo / ".git" / "hooks"
    dlm_git(repo, "hooks", "install", "--uninstall", check=True)
    marker = tmp_path / "marker"
    _write_hook(hooks / "pre-commit", FOREIGN.format(marker=marker, code=1))
    dlm_git(repo, "hooks", "install", check=True)
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    proc = commit(repo)
    assert proc.returncode == 1
    assert head(repo) == before
    assert marker.read_text().count("ran") == 1
    assert "dlm-git" not in proc.stderr  # refused by the chained hook, before ours ran


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_core_hooks_path_is_honoured(repo: Path, tmp_path: Path, absolute: bool) -> None:
    dlm_git(repo, "hooks", "install", "--uninstall", check=True)
    custom = (tmp_path / "shared-hooks") if absolute else (repo / "custom-hooks")
    git(repo, "config", "core.hooksPath", str(custom) if absolute else "custom-hooks")
    out = dlm_git(repo, "hooks", "install", check=True).stdout
    assert f"pre-commit: installed in {custom}" in out
    assert {"pre-commit", "pre-merge-commit", "pre-push"} <= set(_hook_files(custom))
    assert "pre-commit" not in _hook_files(repo / ".git" / "hooks")
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    refused(commit(repo), repo, before)


def test_dvc_install_refuses_after_ours(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    installed = _hook_files(hooks)
    proc = run([str(VENV_BIN / "dvc"), "install"], repo, check=False)
    assert proc.returncode != 0
    assert "already exists" in proc.stdout + proc.stderr
    assert _hook_files(hooks) == installed


def test_ours_after_dvc_install_chains_dvcs_hook(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    dlm_git(repo, "hooks", "install", "--uninstall", check=True)
    run([str(VENV_BIN / "dvc"), "install"], repo)
    dvc_pre_commit = (hooks / "pre-commit").read_text("utf-8")
    assert "dvc git-hook pre-commit" in dvc_pre_commit
    out = dlm_git(repo, "hooks", "install", check=True).stdout
    assert "runs first as pre-commit.dlm-git-chained" in out
    assert "runs first as pre-push.dlm-git-chained" in out
    assert (hooks / "pre-commit.dlm-git-chained").read_text("utf-8") == dvc_pre_commit
    assert (hooks / "post-checkout").is_file()  # DVC's other hook is left alone
    before = head(repo)
    write(repo, "README.md", "# Changed\n")
    passed(commit(repo), repo, before)
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    refused(commit(repo), repo, before)


PLANTED = """import pathlib
pathlib.Path({marker!r}).write_text("planted dlm_git ran")
"""


def test_a_dlm_git_package_in_the_work_tree_never_runs_in_the_hooks(
    repo: Path, tmp_path: Path
) -> None:
    """git runs hooks in the work tree's root, which holds the commit's bytes: a committed
    `dlm_git/` there must not replace the installed dlm-git (`python -m` would put the
    working directory first on the import path)."""
    marker = tmp_path / "planted"
    (repo / "dlm_git").mkdir()
    write(repo, "dlm_git/__init__.py", PLANTED.format(marker=str(marker)))
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    proc = refused(commit(repo), repo, before)
    assert "doc.sha256" in proc  # the installed dlm-git judged the commit
    hooks = repo / ".git" / "hooks"
    push = run(
        [str(hooks / "pre-push"), "origin", str(tmp_path / "remote")], repo, check=False, input=""
    )
    assert push.returncode == 0, push.stderr
    assert not marker.exists()
