"""Integration fixtures: a small trainable document in a throwaway git repo.

Training is the slow part, so the document is trained once per session (`trained_once`)
and each test gets a fresh repository holding a copy of the document *and* its outputs
(`trained_repo`). Tests that need to retrain do so in-process through `run_cli`, which
calls `dlm_git.cli.main` and returns `(exit code, stdout, stderr)`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import RunCli
from tests.support.demo import DEVICE_ARGS, Trained, write_fast_demo
from tests.support.files import snapshot
from tests.support.gitrepo import init_repo
from tests.support.shared import build_once, shared_root

DOC_DIRNAME = "demo"


@pytest.fixture(scope="session")
def base_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tiny base's cache dir: tests/conftest.py's if it set one, else a session tmp dir."""
    existing = os.environ.get("DLM_GIT_BASE_CACHE")
    if existing:
        yield Path(existing)
        return
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("integration-base-cache")
        mp.setenv("DLM_GIT_BASE_CACHE", str(path))
        yield path


def _call_main(args: tuple[str, ...]) -> int:
    from dlm_git.cli import main

    return main([str(a) for a in args])


@pytest.fixture
def run_cli(capfd: pytest.CaptureFixture[str], base_cache: Path) -> RunCli:
    """`run_cli(*args) -> (code, stdout, stderr)`: the CLI in-process, output captured."""

    def run(*args: object) -> tuple[int, str, str]:
        capfd.readouterr()
        code = _call_main(tuple(str(a) for a in args))
        out, err = capfd.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def trained_once(tmp_path_factory: pytest.TempPathFactory, base_cache: Path) -> Trained:
    """The fast demo document, trained once per run (in-process, by whichever worker asks
    first: tests/support/shared.py). Never modify it."""

    def build(repo: Path) -> None:
        init_repo(repo)
        write_fast_demo(repo / DOC_DIRNAME)
        code = _call_main(("train", str(repo / DOC_DIRNAME), "-q", *DEVICE_ARGS))
        assert code == 0, "training the fast demo document failed"

    repo = build_once(shared_root(tmp_path_factory), "trained-once", build)
    doc_dir = repo / DOC_DIRNAME
    files = snapshot(doc_dir)
    assert "adapter/adapter_model.safetensors" in files and "dlm.lock" in files
    return Trained(repo=repo, doc_dir=doc_dir, files=files)


@pytest.fixture
def trained_repo(tmp_path: Path, trained_once: Trained) -> Path:
    """A fresh git repo holding a copy of the trained document and its outputs; the doc dir."""
    repo = init_repo(tmp_path / "repo")
    doc_dir = repo / DOC_DIRNAME
    shutil.copytree(trained_once.doc_dir, doc_dir)
    assert snapshot(doc_dir) == trained_once.files
    return doc_dir


@pytest.fixture
def train(run_cli: RunCli) -> RunCli:
    """`train(doc_dir, *flags) -> (code, stdout, stderr)`: no progress, CPU, in-process
    (the summary on stdout: `--quiet` would drop it)."""

    def run(doc_dir: Path, *flags: str) -> tuple[int, str, str]:
        return run_cli("train", str(doc_dir), "--no-progress", *DEVICE_ARGS, *flags)

    return run
