"""Falsifiability fixtures: one verified repository per session, a forger per test.

`verified_repo` trains the starter document once (`dlm-git init` + `dvc repro` + commit,
~40 s). `forge` gives each test its own full copy of that repository (work tree, .git
and .dvc/cache) and a `Forge` (see forgery.py) that tampers with it and runs
`dlm-git verify`. `forgery` is the helper module itself (mutations, assertions).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.support.forge import load_forgery


@pytest.fixture(scope="session")
def forgery() -> ModuleType:
    return load_forgery()


@pytest.fixture(scope="session")
def verified_repo(tmp_path_factory: pytest.TempPathFactory, forgery: ModuleType) -> Path:
    """The pristine trained-and-committed repository. Never modify it: use `forge`."""
    return forgery.build_verified_repo(tmp_path_factory.getbasetemp())


@pytest.fixture
def forge(
    tmp_path: Path,
    verified_repo: Path,
    forgery: ModuleType,
    capfd: pytest.CaptureFixture[str],
):  # -> forgery.Forge
    root = forgery.copy_repo(verified_repo, tmp_path / "repo")
    return forgery.Forge(root, forgery.call_main_in(root, capfd))
