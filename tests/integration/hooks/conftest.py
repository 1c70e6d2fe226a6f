"""The git hooks, driven by real `git commit` / `git merge` / `git push` subprocesses.

One repository is set up once per run (shared by xdist workers: tests/support/shared.py)
the way a user would (`dlm-git init --doc notes`, `dvc repro`, `git add -A`, `git
commit`; the hook is installed by `init`), and every test works on a full copy of it
(`.git` and `.dvc/cache` included), so nothing is retrained per test. A second fixture
retrains once per run after a `.dlm` edit (`dvc repro`), for the "retrained and
committed" case and as the source of a second, real adapter. The helpers are
tests/support/hookrepo.py.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import dlm_git
from tests.support.gitrepo import git, head, init_repo
from tests.support.hookrepo import DLM, DOC, MANIFEST, commit, edit_dlm, read, repro, write
from tests.support.shared import build_once, shared_root


@dataclass(frozen=True)
class Trained:
    repo: Path
    head: str


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """`dlm-git init --doc notes` + `dvc repro` + first commit (through the hook), built
    once per run (tests/support/shared.py)."""
    repo = build_once(shared_root(tmp_path_factory), "hooks-trained", _build_trained)
    _seed_base_cache(repo)
    return Trained(repo, head(repo))


def _build_trained(repo: Path) -> None:
    init_repo(repo)
    out = dlm_git(repo, "init", "--doc", DOC, check=True).stdout
    assert "pre-commit: installed" in out
    text = read(repo, DLM).decode("utf-8")
    text, n = re.subn(r"(?m)^(  max_steps:) \d+$", r"\1 2", text)
    assert n == 1, "the starter document has no training.max_steps"
    text = re.sub(r"(?m)^(  sequence_len:) \d+$", r"\1 32", text)
    write(repo, DLM, text, stage=False)
    write(repo, "README.md", "# A project with a trained document\n", stage=False)
    repro(repo)
    git(repo, "add", "-A")
    proc = commit(repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr


def _seed_base_cache(repo: Path) -> None:
    """Put the pipeline's built tiny base into the base cache (`DLM_GIT_BASE_CACHE`), where
    `verify COMMIT` (the pre-push hook) looks for it; a machine that ever ran `dlm-git
    train` without `--tiny-dir` has it there. The cold-cache case has its own test."""
    from dlm_git.base.tiny import check_tiny_dir, tiny_dir

    cached = tiny_dir()
    if not (cached / "dlm_git_base.json").is_file():
        shutil.copytree(repo / "bases" / "tiny", cached, dirs_exist_ok=True)
    check_tiny_dir(cached)


@pytest.fixture(scope="session")
def retrained(trained: Trained, tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """A copy of `trained` whose .dlm was edited and retrained (`dvc repro`), not staged;
    built once per run."""

    def build(repo: Path) -> None:
        shutil.copytree(trained.repo, repo, symlinks=True)
        write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
        repro(repo)
        old = json.loads(git(repo, "show", f"HEAD:{MANIFEST}"))["adapter"]["tensor_root"]
        new = json.loads(read(repo, MANIFEST))["adapter"]["tensor_root"]
        assert old != new, "the edit did not change the adapter; make EDIT reach training"

    repo = build_once(shared_root(tmp_path_factory), "hooks-retrained", build)
    return Trained(repo, trained.head)


@pytest.fixture
def repo(trained: Trained, tmp_path: Path) -> Path:
    """A private copy of the trained, committed repository (HEAD = the first commit)."""
    dest = tmp_path / "repo"
    shutil.copytree(trained.repo, dest, symlinks=True)
    assert head(dest) == trained.head
    assert git(dest, "status", "--porcelain") == ""
    return dest


@pytest.fixture
def retrained_repo(retrained: Trained, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(retrained.repo, dest, symlinks=True)
    return dest
