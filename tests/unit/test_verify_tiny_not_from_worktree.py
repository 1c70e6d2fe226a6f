"""A verifier never takes the tiny base's weights from the work tree: `bases/tiny` may
have been filled by a checked-out commit or a `dvc pull` of its outputs, and a spec file
there names a build without proving its weights. Only the git hooks (no build allowed,
the committer's own work tree) look there."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.base.tiny import build_tiny_base, built_revision
from dlm_git.layout import PIPELINE_TINY_DIR
from dlm_git.verify.locate import locate_base_dir

WEIGHTS = "model.safetensors"


@pytest.fixture
def forged_work_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose `bases/tiny` is a build with one weight byte changed, on a
    machine whose base cache is empty."""
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    forged = repo / PIPELINE_TINY_DIR
    build_tiny_base(forged)
    data = bytearray((forged / WEIGHTS).read_bytes())
    data[-1] ^= 0x01
    (forged / WEIGHTS).write_bytes(bytes(data))
    return repo


def test_verify_builds_its_own_base_instead_of_the_work_trees(forged_work_tree: Path) -> None:
    forged = forged_work_tree / PIPELINE_TINY_DIR
    revision = built_revision(forged)
    found = locate_base_dir(
        "builtin:tiny", forged_work_tree, forged_work_tree, None, revision=revision
    )
    assert found is not None and found.resolve() != forged.resolve()
    assert (found / WEIGHTS).read_bytes() != (forged / WEIGHTS).read_bytes()


def test_the_hooks_still_find_the_committers_own_pipeline_build(forged_work_tree: Path) -> None:
    forged = forged_work_tree / PIPELINE_TINY_DIR
    found = locate_base_dir("builtin:tiny", forged_work_tree, forged_work_tree, None, build=False)
    assert found == forged
