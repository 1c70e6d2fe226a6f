"""Hostile-input fixtures: the falsifiability suite's verified repository (built once per
session by tests/falsifiability/forgery.py, loaded by path), a copy per test, and a
trained repository whose sources have hostile file names. Tests call the real `dlm-git`
executable and hook modules as subprocesses (hostile_helpers.py), so a crash shows as
what it is: a traceback on stderr or a signal (negative exit status)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from hostile_helpers import HOSTILE_NAMES, NON_UTF8_NAME, SYMLINKS, dead_pid


@pytest.fixture(scope="session")
def hostile_names_repo(
    tmp_path_factory: pytest.TempPathFactory, verified_repo: Path, forgery: ModuleType
) -> Path:
    """The verified repository with source files of hostile names (and symlinks, one to a
    sibling note, one to `.git/config`) added to demo/notes,
    stale staging directories planted beside the document (a killed train's leftovers,
    which the next train must sweep), retrained by `dvc repro`, and committed. Built
    once per session; never modify it (copy it)."""
    root = forgery.copy_repo(verified_repo, tmp_path_factory.mktemp("hostile-names") / "repo")
    notes = root / forgery.DOC / "notes"
    for i, name in enumerate(HOSTILE_NAMES):
        (notes / name).write_text(f"# Hostile name {i}\n\nThe file named {name!r}.\n", "utf-8")
    with open(os.path.join(os.fsencode(notes), NON_UTF8_NAME), "wb") as fh:
        fh.write(b"# not UTF-8 by name\n")
    for link, target in SYMLINKS.items():  # never followed: skipped with a reason
        (notes / link).symlink_to(target)
    doc = root / forgery.DOC
    stale = [f".segments.new.{dead_pid()}.abc", ".adapter.new.killed", ".segments.old.x"]
    for name in stale:
        (doc / name).mkdir()
        (doc / name / "junk").write_bytes(b"left by a killed train")
    paths = [f"{forgery.DOC}/{n}" for n in stale]
    ignored = forgery.run(["git", "check-ignore", *paths], root, check=False).stdout.split()
    assert ignored == paths, f"staging directories not ignored by git: {ignored}"
    forgery.run(["dvc", "repro"], root)
    assert not [n for n in stale if (doc / n).exists()], "stale staging not swept"
    forgery.commit_all(root, "hostile names in sources")
    assert forgery.git(root, "status", "--porcelain") == ""
    return root
