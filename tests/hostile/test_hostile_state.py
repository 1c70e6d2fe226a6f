"""Machine-local state lives where no commit can reach it: in the git directory.

A commit can carry `.dlm-git` (or `.dlm-git/quarantine`, `.dlm-git/token-cache`) as a
symbolic link to any directory. Whatever dlm-git remembers on a machine (fsck's stat
record and quarantine, the token cache, the pre-commit hook's hash cache, verify's
verdicts) is written under `.git/dlm-git/`, never through such a link: after each
command the link's target is still empty. A link inside `.git/dlm-git/` itself (which
no commit can make) is refused in one line. A token cache an older dlm-git kept in
`<repo>/.dlm-git/` is moved into the git directory once, unless a commit brought it.

Each test runs the real `dlm-git` executable (or hook module) on a copy of the
falsifiability suite's trained, committed repository.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.support.cli import dlm_git, hook
from tests.support.gitrepo import git
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

STATE = Path(".git") / "dlm-git"
LINKS = (".dlm-git", ".dlm-git/quarantine", ".dlm-git/token-cache")
"""What a commit links outside the repository."""


@pytest.fixture
def repo(tmp_path: Path, verified_repo: Path) -> Path:
    return Path(copy_repo(verified_repo, tmp_path / "repo"))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """The directory a committed link points at: must stay empty."""
    path = tmp_path / "outside"
    path.mkdir()
    return path


def carry_link(repo: Path, rel: str, target: Path) -> None:
    """Commit `rel` as a symbolic link to `target` (what a pulled commit checks out), and
    start from no machine-local state at all, so that what is there after a command is
    what that command wrote."""
    shutil.rmtree(repo / STATE, ignore_errors=True)
    link = repo / rel
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)
    git(repo, "add", "-f", rel)
    git(repo, "commit", "-q", "--no-verify", "-m", f"carry {rel}")


def assert_untouched(outside: Path, repo: Path, rel: str) -> None:
    assert sorted(outside.rglob("*")) == [], "dlm-git wrote through the committed link"
    assert (repo / rel).is_symlink() and (repo / rel).resolve() == outside.resolve()


def weights_object(repo: Path) -> Path:
    """The DVC cache file of the committed adapter's weights."""
    from dlm_git.dvcfiles import cache_object, dir_listing

    stages = yaml.safe_load((repo / "dvc.lock").read_text("utf-8"))["stages"]
    md5 = next(
        o["md5"]
        for s in stages.values()
        for o in s.get("outs") or []
        if o["path"] == f"{DOC}/adapter"
    )
    listing = dir_listing(repo, md5)
    assert listing is not None
    return cache_object(repo, listing["adapter_model.safetensors"])


def corrupt(path: Path) -> bytes:
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.chmod(0o644)
    path.unlink()
    path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.parametrize("rel", LINKS)
def test_fsck_records_in_the_git_dir(repo: Path, outside: Path, rel: str) -> None:
    carry_link(repo, rel, outside)
    time.sleep(1.2)  # past fsck's racy window: the copied files' stat gets recorded
    result = dlm_git(repo, "fsck")
    assert result.code == 0, result.stdout + result.stderr
    assert_untouched(outside, repo, rel)
    assert (repo / STATE / "fsck-record.json").is_file()


@pytest.mark.parametrize("rel", LINKS)
def test_fsck_repair_quarantines_in_the_git_dir(repo: Path, outside: Path, rel: str) -> None:
    carry_link(repo, rel, outside)
    bad = corrupt(weights_object(repo))
    result = dlm_git(repo, "fsck", "--repair", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    assert_untouched(outside, repo, rel)
    payload = json.loads(result.stdout)
    assert payload["quarantine"].startswith(f"{STATE.as_posix()}/quarantine/"), payload
    moved = [r["quarantine"] for r in payload["repairs"]]
    assert moved and all(m.startswith(payload["quarantine"]) for m in moved), payload
    assert (repo / moved[0]).read_bytes() == bad


@pytest.mark.parametrize("rel", LINKS)
def test_tokenize_caches_in_the_git_dir(repo: Path, outside: Path, rel: str) -> None:
    carry_link(repo, rel, outside)
    result = dlm_git(repo, "tokenize", DOC, "--json")
    assert result.code == 0, result.stderr
    assert_untouched(outside, repo, rel)
    cache = json.loads(result.stdout)["cache"]
    assert cache["path"] == str(repo / STATE / "token-cache")
    assert list((repo / STATE / "token-cache" / "packs").iterdir())


def test_train_caches_in_the_git_dir(repo: Path, outside: Path) -> None:
    carry_link(repo, ".dlm-git/token-cache", outside)
    shutil.rmtree(repo / DOC / "tokens")  # else train reuses them, reading no cache
    result = dlm_git(repo, "train", DOC)
    assert result.code == 0, result.stderr
    assert_untouched(outside, repo, ".dlm-git/token-cache")
    assert list((repo / STATE / "token-cache" / "packs").iterdir())


def test_pre_commit_hook_keeps_its_hash_cache_in_the_git_dir(repo: Path, outside: Path) -> None:
    carry_link(repo, ".dlm-git", outside)
    with open(repo / DOC / "notes" / "README.md", "a", encoding="utf-8") as fh:
        fh.write("\nA staged source: the hook checks the document, its adapter included.\n")
    git(repo, "add", f"{DOC}/notes/README.md")
    time.sleep(1.2)  # past the hash cache's racy window: the copied adapter's hash is recorded
    result = hook(repo, "pre_commit")
    assert "Traceback" not in result.stderr, result.stderr
    assert_untouched(outside, repo, ".dlm-git")
    assert (repo / STATE / "hash-cache.json").is_file()


def test_verify_remembers_in_the_git_dir(repo: Path, outside: Path) -> None:
    carry_link(repo, ".dlm-git", outside)
    result = dlm_git(repo, "verify", "HEAD")
    assert result.code == 0, result.stdout + result.stderr
    assert_untouched(outside, repo, ".dlm-git")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert (repo / STATE / "verdicts" / f"{head}.json").is_file()


@pytest.mark.parametrize(
    ("link", "args"),
    [
        ("", ("fsck",)),
        ("quarantine", ("fsck", "--repair")),
        ("token-cache", ("tokenize", DOC)),
    ],
)
def test_a_link_in_the_git_dirs_state_is_refused(
    repo: Path, outside: Path, link: str, args: tuple[str, ...]
) -> None:
    """No commit can make these links; dlm-git refuses them anyway (defence in depth)."""
    path = repo / STATE / link if link else repo / STATE
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if link == "quarantine":
        corrupt(weights_object(repo))
    path.symlink_to(outside, target_is_directory=True)
    result = dlm_git(repo, *args)
    line = result.one_line_error(1, str(path), "symbolic link")
    assert "hint:" in line
    assert sorted(outside.rglob("*")) == []


def _legacy_token_cache(repo: Path) -> Path:
    """The repository as an older dlm-git left it: the token cache in `.dlm-git/`."""
    old = repo / ".dlm-git" / "token-cache"
    new = repo / STATE / "token-cache"
    if new.is_dir():
        old.parent.mkdir(exist_ok=True)
        os.rename(new, old)
    assert list((old / "packs").iterdir()), "the trained repository has a token cache"
    return old


def test_an_older_token_cache_is_moved_into_the_git_dir(repo: Path) -> None:
    old = _legacy_token_cache(repo)
    packs = sorted(p.name for p in (old / "packs").iterdir())
    result = dlm_git(repo, "tokenize", DOC, "--json")
    assert result.code == 0, result.stderr
    cache = json.loads(result.stdout)["cache"]
    assert cache["path"] == str(repo / STATE / "token-cache")
    assert cache["misses"] == 0 and cache["hits"] == cache["total_rows"] > 0, cache
    assert not old.exists()
    assert sorted(p.name for p in (repo / STATE / "token-cache" / "packs").iterdir()) == packs


def test_a_token_cache_a_commit_brought_is_never_adopted(repo: Path) -> None:
    old = _legacy_token_cache(repo)
    git(repo, "add", "-f", ".dlm-git")
    git(repo, "commit", "-q", "--no-verify", "-m", "a commit carries a token cache")
    result = dlm_git(repo, "tokenize", DOC, "--json")
    assert result.code == 0, result.stderr
    cache = json.loads(result.stdout)["cache"]
    assert cache["path"] == str(repo / STATE / "token-cache")
    assert cache["hits"] == 0 and cache["misses"] == cache["total_rows"] > 0, cache
    assert list((old / "packs").iterdir())
    assert git(repo, "status", "--porcelain", "--", ".dlm-git") == ""
