"""Shared fixtures: a hermetic session, a throwaway git repository, a `.dlm` writer, and the
verified repository with its forger.

The session's environment is hermetic: git and DVC read only the session's configuration
(`tests/support/env.py`: a user's global git config, hooks path or DVC remote never reach
a test), every session gets its own base-model cache (`DLM_GIT_BASE_CACHE`) so nothing is
ever written to `~/.cache`, a `DLM_GIT_CACHE_DIR` override and a user's `DLM_GIT_STRICT`
are removed (token caches live in each test's repository unless a test sets one), DVC
analytics are off, and Hugging Face libraries stay offline. OpenMP threads sleep when idle
(`OMP_WAIT_POLICY=PASSIVE`): two workers' trainings share the cores.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlm_git.numerics.activate import activate
from dlm_git.numerics.plan import plan
from dlm_git.numerics.table import NumericsError
from tests.support.docs import WriteDoc
from tests.support.docs import write_doc as write_doc_file
from tests.support.env import DROPPED, GIT_CONFIG_PAIRS, isolation
from tests.support.forger import Forge
from tests.support.gitrepo import init_repo
from tests.support.shared import shared_root
from tests.support.verdicts import call_main_in
from tests.support.verified import build_verified_repo, copy_repo

# Two xdist workers share the cores, each training with `DLM_GIT_THREADS` threads: an
# OpenMP thread that spins while idle takes cycles the other worker's training needs.
# Idle threads here sleep at once (read when the OpenMP runtime starts; children inherit
# it). How a thread waits changes no number; a session that sets its own value keeps it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Kernel variables only count before torch initialises: pin the default CPU profile for
# this test session now, so in-process training (`run_cli`) runs here instead of in a
# child process. Tests of other profiles train in subprocesses.
with contextlib.suppress(NumericsError):
    activate(plan("cpu").env)


@pytest.fixture(autouse=True, scope="session")
def _hermetic_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in isolation().items():
            mp.setenv(key, value)
        # what subprocess_env drops for a child, gone here too: in-process dlm-git calls
        # (train, verify, replays) then read the repository they are given, never the one
        # a git hook running this suite names
        for key in [*DROPPED, *(k for k in os.environ if k.startswith(GIT_CONFIG_PAIRS))]:
            mp.delenv(key, raising=False)
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        mp.setenv("DLM_GIT_BASE_CACHE", str(tmp_path_factory.mktemp("base-cache")))
        mp.delenv("DLM_GIT_CACHE_DIR", raising=False)  # token caches stay in each test repo
        mp.delenv("DLM_GIT_STRICT", raising=False)  # strict mode only where a test sets it
        yield


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """An empty git work tree with a local identity configured."""
    return init_repo(tmp_path / "repo")


@pytest.fixture
def write_doc() -> WriteDoc:
    """`write_doc(directory, body="", *, frontmatter="", name="doc.dlm", dlm_id=...)`."""
    return write_doc_file


# --------------------------------------------------------------------------- the forger
# One trained, committed repository per run (shared by xdist workers), built only when a
# test asks for it
# (`dlm-git init` + `dvc repro` + commit, ~40 s: tests/support/verified.py); `forge` gives
# each test its own full copy (work tree, .git, .dvc/cache) and a `Forge`
# (tests/support/forger.py) that tampers with it and runs `dlm-git verify`.


@pytest.fixture(scope="session")
def verified_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pristine trained-and-committed repository. Never modify it: use `forge`."""
    return build_verified_repo(shared_root(tmp_path_factory))


@pytest.fixture
def forge(tmp_path: Path, verified_repo: Path, capfd: pytest.CaptureFixture[str]) -> Forge:
    root = copy_repo(verified_repo, tmp_path / "repo")
    return Forge(root, call_main_in(root, capfd))
