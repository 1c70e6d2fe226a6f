"""The hash level finds a commit's builtin:tiny by the revision its manifest records,
without computing this machine's spec: that reads the installed libraries' package
metadata (`importlib.metadata`, a cost on every `verify` start, issue 28), which only
matters when the recorded build is not in the base cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.base import tiny
from dlm_git.base.tiny import SPEC_FILE, built_revision
from dlm_git.verify.locate import locate_base_dir


def _spec_not_read() -> bytes:
    raise AssertionError("the installed libraries' tiny spec was computed")


@pytest.fixture
def recorded_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A base cache holding a tiny build's spec file under its revision (what
    `built_revision` reads), on a machine where computing the installed spec fails."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(cache))
    spec = b'{"name":"builtin:tiny","versions":{"torch":"a version not installed here"}}'
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / SPEC_FILE).write_bytes(spec)
    revision = built_revision(staged)
    assert revision is not None
    build = cache / revision
    build.parent.mkdir(parents=True)
    staged.rename(build)
    monkeypatch.setattr(tiny, "tiny_spec_json", _spec_not_read)
    return build, revision


def test_the_recorded_build_is_found_without_the_installed_spec(
    recorded_build: tuple[Path, str], tmp_path: Path
) -> None:
    build, revision = recorded_build
    found = locate_base_dir("builtin:tiny", tmp_path, tmp_path, None, revision=revision)
    assert found == build


def test_a_build_not_in_the_cache_still_asks_for_the_installed_spec(
    recorded_build: tuple[Path, str], tmp_path: Path
) -> None:
    other = "tiny-" + "0" * 16
    with pytest.raises(AssertionError, match="installed libraries"):
        locate_base_dir("builtin:tiny", tmp_path, tmp_path, None, build=False, revision=other)
