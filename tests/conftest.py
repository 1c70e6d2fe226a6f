"""Shared fixtures: a throwaway git repository, a `.dlm` writer, and a hermetic environment.

Every test session gets its own base-model cache (`DLM_GIT_BASE_CACHE`) so nothing is ever
written to `~/.cache`, a `DLM_GIT_CACHE_DIR` override is removed (token caches live in each
test's repository unless a test sets one), DVC analytics are off, and Hugging Face
libraries stay offline.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dlm_git import numerics
from dlm_git.determinism import plan
from tests.support.forge import load_forgery
from tests.support.gitrepo import init_repo

# Kernel variables only count before torch initialises: pin the default CPU profile for
# this test session now, so in-process training (`run_cli`) runs here instead of in a
# child process. Tests of other profiles train in subprocesses.
with contextlib.suppress(numerics.NumericsError):
    numerics.activate(plan("cpu").env)

DEFAULT_DLM_ID = "01M800GRBP0GEV3WAMXAHDD42B"

WriteDoc = Callable[..., Path]


@pytest.fixture(autouse=True, scope="session")
def _hermetic_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DVC_NO_ANALYTICS", "1")
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        mp.setenv("DLM_GIT_BASE_CACHE", str(tmp_path_factory.mktemp("base-cache")))
        mp.delenv("DLM_GIT_CACHE_DIR", raising=False)  # token caches stay in each test repo
        yield


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """An empty git work tree with a local identity configured."""
    return init_repo(tmp_path / "repo")


def _write_doc(
    directory: Path,
    body: str = "",
    *,
    frontmatter: str = "",
    name: str = "doc.dlm",
    dlm_id: str | None = DEFAULT_DLM_ID,
) -> Path:
    """Write `<directory>/<name>`: `---`, `dlm_id`, the extra frontmatter YAML, `---`, body."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["---"]
    if dlm_id is not None:
        lines.append(f"dlm_id: {dlm_id}")
    if frontmatter:
        lines.append(frontmatter.strip("\n"))
    lines.append("---")
    text = "\n".join(lines) + "\n" + body
    path = directory / name
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def write_doc() -> WriteDoc:
    """`write_doc(directory, body="", *, frontmatter="", name="doc.dlm", dlm_id=...)`."""
    return _write_doc


@pytest.fixture
def clean_env() -> dict[str, str]:
    """A copy of the (hermetic) environment for subprocesses."""
    return dict(os.environ)


# --------------------------------------------------------------------------- the forger
# One trained, committed repository per session, built only when a test asks for it
# (`dlm-git init` + `dvc repro` + commit, ~40 s); `forge` gives each test its own full copy
# (work tree, .git, .dvc/cache) and a `Forge` (tests/falsifiability/forgery.py) that
# tampers with it and runs `dlm-git verify`; `forgery` is the helper module itself.


@pytest.fixture(scope="session")
def forgery() -> ModuleType:
    return load_forgery()


@pytest.fixture(scope="session")
def verified_repo(tmp_path_factory: pytest.TempPathFactory, forgery: ModuleType) -> Path:
    """The pristine trained-and-committed repository. Never modify it: use `forge`."""
    return Path(forgery.build_verified_repo(tmp_path_factory.getbasetemp()))


@pytest.fixture
def forge(
    tmp_path: Path, verified_repo: Path, forgery: ModuleType, capfd: pytest.CaptureFixture[str]
) -> Any:
    root = forgery.copy_repo(verified_repo, tmp_path / "repo")
    return forgery.Forge(root, forgery.call_main_in(root, capfd))
