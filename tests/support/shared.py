"""Builds shared by every test of a run: a trained repository made once and read by many.

Invariants:
- One build per run, whatever the workers. Under pytest-xdist each worker is a process of
  its own with its own base temp (`.../pytest-N/popen-gwK`); a shared build lives in the
  run's directory (`.../pytest-N`, `shared_root`), and `build_once` builds it under a file
  lock, so one worker builds while the others wait for it and then reuse it.
- A build is complete or absent: `<name>.ready` is written last, after the build returned,
  and a directory without it (a build that failed or was killed) is removed and built again.
- Nobody changes a shared build: a test copies it (`tests/support/verified.copy_repo`: work
  tree, `.git` and `.dvc/cache`, which hold no absolute paths) and changes its copy.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every worker of this run shares (the base temp without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(root: Path, name: str, build: Callable[[Path], None]) -> Path:
    """`root/name`, made by `build(root/name)` once for the whole run (see the module)."""
    dest = root / name
    ready = root / f"{name}.ready"
    with FileLock(str(root / f"{name}.lock")):
        if not ready.is_file():
            if dest.exists():
                shutil.rmtree(dest)
            build(dest)
            ready.write_text("ok\n")
    return dest
