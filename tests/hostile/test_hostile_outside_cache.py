"""`fsck --repair` changes a DVC cache only where the auditor chose it.

A committed `.dvc/config` may name a cache directory anywhere (DVC honours it), and a
commit may carry `.dvc/cache` as a link. `fsck` reads such a cache like any other, but
`--repair` (which moves files out of the cache and has DVC fetch into it) refuses, in one
line and before anything is read or written, a cache outside the repository that only
the committed configuration chose, unless the auditor confirms it: `--allow-outside-cache`,
or naming it in their own `.dvc/config.local`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.cli import dlm_git
from tests.support.gitrepo import git
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

STATE = Path(".git") / "dlm-git"
VARIANTS = ("absolute", "relative", "linked")
"""How the commit points the DVC cache outside: `cache.dir` as an absolute path, as a
path relative to `.dvc/` that climbs out, or a committed `.dvc/cache` link."""


@pytest.fixture
def repo(tmp_path: Path, verified_repo: Path) -> Path:
    return Path(copy_repo(verified_repo, tmp_path / "repo"))


def point_cache_outside(repo: Path, outside: Path, how: str) -> None:
    """Move the DVC cache to `outside` and commit what makes DVC (and dlm-git) use it."""
    shutil.move(repo / ".dvc" / "cache", outside)
    if how == "linked":
        (repo / ".dvc" / "cache").symlink_to(outside, target_is_directory=True)
        git(repo, "add", "-f", ".dvc/cache")
    else:
        where = str(outside) if how == "absolute" else f"../../{outside.name}"
        with open(repo / ".dvc" / "config", "a", encoding="utf-8") as fh:
            fh.write(f"[cache]\n    dir = {where}\n")
        git(repo, "add", ".dvc/config")
    git(repo, "commit", "-q", "--no-verify", "-m", "the DVC cache is elsewhere")


def corrupt_weights(repo: Path) -> tuple[Path, bytes]:
    from dlm_git.dvcfiles import cache_object, dir_listing

    stages = yaml.safe_load((repo / "dvc.lock").read_text("utf-8"))["stages"]
    outs = [o for s in stages.values() for o in s.get("outs") or []]
    listing = dir_listing(repo, next(o["md5"] for o in outs if o["path"] == f"{DOC}/adapter"))
    assert listing is not None, "the cache moved outside is the one read"
    path = cache_object(repo, listing["adapter_model.safetensors"])
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    return path, bytes(data)


@pytest.fixture(params=VARIANTS)
def outside_cache(request: pytest.FixtureRequest, repo: Path, tmp_path: Path) -> tuple[Path, bytes]:
    """The repository with its committed config pointing the DVC cache outside it, and a
    corrupted object there: (its path, its bytes)."""
    point_cache_outside(repo, tmp_path / "outside-cache", request.param)
    path, data = corrupt_weights(repo)
    assert not path.resolve().is_relative_to(repo.resolve())
    return path, data


def test_repair_refuses_a_cache_only_the_commit_put_outside(
    repo: Path, outside_cache: tuple[Path, bytes]
) -> None:
    path, data = outside_cache
    line = dlm_git(repo, "fsck", "--repair").one_line_error(1, "--allow-outside-cache")
    assert "outside the repository" in line and "dvc cache dir --local" in line
    assert path.read_bytes() == data  # nothing moved
    assert not (repo / STATE / "quarantine").exists()
    assert not (repo / STATE / "fsck-record.json").exists()  # nothing read or written


def test_fsck_without_repair_still_checks_it(repo: Path, outside_cache: tuple[Path, bytes]) -> None:
    path, data = outside_cache
    result = dlm_git(repo, "fsck", "--json")
    assert result.code == 1, result.stdout + result.stderr
    bad = [o for o in json.loads(result.stdout)["objects"] if o["state"] == "corrupted"]
    shown = path.relative_to(repo).as_posix() if path.is_relative_to(repo) else str(path)
    assert [o["path"] for o in bad] == [shown], bad
    assert path.read_bytes() == data


def test_repair_moves_files_there_once_confirmed(
    repo: Path, outside_cache: tuple[Path, bytes]
) -> None:
    path, data = outside_cache
    result = dlm_git(repo, "fsck", "--repair", "--allow-outside-cache", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    repairs = json.loads(result.stdout)["repairs"]
    assert len(repairs) == 1 and not path.exists(), repairs
    assert (repo / repairs[0]["quarantine"]).read_bytes() == data


@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_the_auditors_own_config_local_confirms_it(repo: Path, tmp_path: Path, how: str) -> None:
    outside = tmp_path / "my-cache"
    shutil.move(repo / ".dvc" / "cache", outside)
    where = str(outside) if how == "absolute" else f"../../{outside.name}"
    (repo / ".dvc" / "config.local").write_text(f"[cache]\n    dir = {where}\n", "utf-8")
    path, data = corrupt_weights(repo)
    result = dlm_git(repo, "fsck", "--repair", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    repairs = json.loads(result.stdout)["repairs"]
    assert len(repairs) == 1 and not path.exists(), repairs
    assert (repo / repairs[0]["quarantine"]).read_bytes() == data


def test_allow_outside_cache_is_only_for_repair(repo: Path) -> None:
    dlm_git(repo, "fsck", "--allow-outside-cache").one_line_error(2, "--repair")
