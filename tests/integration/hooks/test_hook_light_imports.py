"""The hooks stay light: pre-commit, pre-merge-commit and pre-push never import torch,
transformers, peft or dvc, whatever they find, and pre-commit and pre-merge-commit none
of the dlm-git modules they do not need (`OFF_PRE_COMMIT_PATH`; read from `python -X
importtime`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import run, subprocess_env
from tests.support.gitrepo import git, head
from tests.support.hookrepo import (
    DLM,
    HEAVY,
    OFF_PRE_COMMIT_PATH,
    SOURCE,
    imported_modules,
    imported_names,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("module", ["pre_commit", "pre_merge_commit"])
@pytest.mark.parametrize("change", ["dlm", "source", "retrained"])
def test_pre_commit_never_imports_heavy_modules(
    retrained_repo: Path, change: str, module: str
) -> None:
    repo = retrained_repo
    if change == "dlm":  # refused early (stale .dlm)
        git(repo, "add", DLM)
    elif change == "source":  # refused after re-expanding the staged sources
        with open(repo / SOURCE, "a", encoding="utf-8") as fh:
            fh.write("more\n")
        git(repo, "add", SOURCE)
    else:  # the retrained outputs: passes, after running every check
        git(repo, "add", "-A")
    argv = [sys.executable, "-X", "importtime", "-m", f"dlm_git.hooks.{module}"]
    proc = run(argv, repo, check=False)
    assert proc.returncode == (0 if change == "retrained" else 1), proc.stderr
    modules = imported_modules(proc.stderr)
    assert "dlm_git" in modules and "yaml" in modules  # the import log was read
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    off_path = imported_names(proc.stderr) & set(OFF_PRE_COMMIT_PATH)
    assert not off_path, sorted(off_path)


def test_pre_push_never_imports_heavy_modules(repo: Path) -> None:
    sha = head(repo)
    line = f"refs/heads/main {sha} refs/heads/main {'0' * 40}\n"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dlm_git.hooks.pre_push", "origin", "x"],
        cwd=repo,
        input=line,
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    assert proc.returncode == 0, proc.stderr
    modules = imported_modules(proc.stderr)
    assert "dlm_git" in modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_pre_push_with_a_cold_base_cache_never_imports_heavy_modules(
    repo: Path, tmp_path: Path
) -> None:
    sha = head(repo)
    line = f"refs/heads/main {sha} refs/heads/main {'0' * 40}\n"

    def pre_push() -> tuple[subprocess.CompletedProcess[str], set[str]]:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "dlm_git.hooks.pre_push", "origin", "x"],
            cwd=repo,
            input=line,
            capture_output=True,
            text=True,
            env=subprocess_env(DLM_GIT_BASE_CACHE=str(tmp_path / "cold-base-cache")),
        )
        return proc, imported_modules(proc.stderr)

    proc, modules = pre_push()
    assert "dlm_git" in modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    # the pipeline's own build (bases/tiny) serves as the base: the push verifies
    assert proc.returncode == 0, proc.stderr

    # no built base anywhere: never built inside the hook; the push warns (CANNOT_VERIFY)
    shutil.rmtree(repo / "bases" / "tiny")
    proc, modules = pre_push()
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("dlm-git:")]
    assert any("WARN" in ln and "CANNOT_VERIFY" in ln for ln in said), said
