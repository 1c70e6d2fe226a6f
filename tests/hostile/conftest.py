"""Hostile-input fixtures: a trained repository whose sources have hostile file names
(tests/support/hostile.py), built once per run from the verified repository
(tests/support/verified.py). Tests copy it and call the real `dlm-git` executable and
hook modules as subprocesses (tests/support/cli.py), so a crash shows as what it is: a
traceback on stderr or a signal (negative exit status)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.env import run
from tests.support.gitrepo import commit_all, git
from tests.support.hostile import HOSTILE_NAMES, NON_UTF8_NAME, SYMLINKS, dead_pid
from tests.support.shared import build_once, shared_root
from tests.support.verified import DOC, copy_repo


@pytest.fixture(scope="session")
def hostile_names_repo(tmp_path_factory: pytest.TempPathFactory, verified_repo: Path) -> Path:
    """The verified repository with source files of hostile names (and symlinks, one to a
    sibling note, one to `.git/config`) added to demo/notes,
    stale staging directories planted beside the document (a killed train's leftovers,
    which the next train must sweep), retrained by `dvc repro`, and committed. Built
    once per run (tests/support/shared.py); never modify it (copy it)."""

    def build(root: Path) -> None:
        copy_repo(verified_repo, root)
        _add_hostile_names(root)

    return build_once(shared_root(tmp_path_factory), "hostile-names", build)


def _add_hostile_names(root: Path) -> None:
    notes = root / DOC / "notes"
    for i, name in enumerate(HOSTILE_NAMES):
        (notes / name).write_text(f"# Hostile name {i}\n\nThe file named {name!r}.\n", "utf-8")
    with open(os.path.join(os.fsencode(notes), NON_UTF8_NAME), "wb") as fh:
        fh.write(b"# not UTF-8 by name\n")
    for link, target in SYMLINKS.items():  # never followed: skipped with a reason
        (notes / link).symlink_to(target)
    doc = root / DOC
    stale = [f".segments.new.{dead_pid()}.abc", ".adapter.new.killed", ".segments.old.x"]
    for name in stale:
        (doc / name).mkdir()
        (doc / name / "junk").write_bytes(b"left by a killed train")
    paths = [f"{DOC}/{n}" for n in stale]
    ignored = run(["git", "check-ignore", *paths], root, check=False).stdout.split()
    assert ignored == paths, f"staging directories not ignored by git: {ignored}"
    # a name that is not UTF-8 under notes/: DVC cannot hash the directory, so `init`
    # makes the inputs stage run on every repro (docs/pipeline.md)
    run(["dlm-git", "init", "--no-hooks"], root)
    run(["dvc", "repro"], root)
    assert not [n for n in stale if (doc / n).exists()], "stale staging not swept"
    commit_all(root, "hostile names in sources")
    assert git(root, "status", "--porcelain") == ""
