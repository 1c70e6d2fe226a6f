"""Hostile file names in a trained document's sources: an honest commit with them
verifies (hash level, both hooks), a name that is not UTF-8 is skipped with a reason,
and a killed train's staging directories are ignored by git and swept by the next train
(the session fixture `hostile_names_repo` plants them before its `dvc repro`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.cli import dlm_git, hook
from tests.support.gitrepo import git
from tests.support.hostile import HOSTILE_NAMES, NON_UTF8_NAME, SYMLINKS
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

ZERO = "0" * 40


def test_honest_commit_with_hostile_names_verifies(
    hostile_names_repo: Path, tmp_path: Path
) -> None:
    root = copy_repo(hostile_names_repo, tmp_path / "repo")
    manifest = json.loads((root / DOC / "manifest.json").read_text("utf-8"))
    recorded = {f["relpath"] for f in manifest["sources"]["files"]}
    for name in HOSTILE_NAMES:
        assert f"notes/{name}" in recorded, sorted(recorded)
    assert not [r for r in recorded if "latin1" in r], "a non-UTF-8 name was taken"
    assert not {f"notes/{link}" for link in SYMLINKS} & recorded, "a symlink was followed"
    result = dlm_git(root, "verify", "HEAD", "--json")
    assert result.code == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "VERIFIED", result.stdout
    sha = git(root, "rev-parse", "HEAD").strip()
    pushed = hook(root, "pre_push", f"refs/heads/main {sha} refs/heads/main {ZERO}\n")
    assert pushed.code == 0 and "Traceback" not in pushed.stderr, pushed.stderr


def test_pre_commit_with_hostile_names_staged(hostile_names_repo: Path, tmp_path: Path) -> None:
    """Re-stage the sources (a no-op change plus a touched manifest-free file): the hook
    re-expands them from the index, hostile names and all, and finds them unchanged."""
    root = copy_repo(hostile_names_repo, tmp_path / "repo")
    notes = root / DOC / "notes"
    for name in HOSTILE_NAMES:
        git(root, "rm", "-q", "--cached", "--", f"{DOC}/notes/{name}")
        git(root, "add", "--", f"{DOC}/notes/{name}")
    (notes / "unrelated.bin").write_bytes(b"\x00binary, skipped")
    git(root, "add", "-A")
    result = hook(root, "pre_commit")
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    # and an edit to a hostile-named source is caught as stale
    (notes / HOSTILE_NAMES[0]).write_text("edited after training\n", "utf-8")
    git(root, "add", "-A")
    result = hook(root, "pre_commit")
    assert result.code == 1 and "staged sources differ" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_non_utf8_name_is_skipped_with_a_reason(hostile_names_repo: Path, tmp_path: Path) -> None:
    root = copy_repo(hostile_names_repo, tmp_path / "repo")
    result = dlm_git(root, "show", DOC, "--json")
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    text = result.stdout
    shown = NON_UTF8_NAME.decode("utf-8", "backslashreplace")
    assert json.dumps(shown)[1:-1] in text or shown in text, text
    assert "name is not valid UTF-8" in text, text
    skipped = {s["relpath"]: s["reason"] for s in json.loads(text)["sources"]["skipped"]}
    for link in SYMLINKS:
        assert skipped[f"notes/{link}"] == "symbolic link (not followed)", skipped


def test_stale_staging_is_ignored_by_init(git_repo: Path) -> None:
    """`dlm-git init` writes ignore lines for a killed train's staging directories, so
    `git add -A` never commits them."""
    init = dlm_git(git_repo, "init", "--doc", "d", "--no-hooks")
    assert init.code == 0, init.stderr
    doc = git_repo / "d"
    for name in (".segments.new.123.x", ".adapter.new.9.y", ".adapter.old.1.z", ".segments.old.q"):
        (doc / name).mkdir()
        (doc / name / "f").write_bytes(b"x")
    git(git_repo, "add", "-A")
    staged = git(git_repo, "diff", "--cached", "--name-only")
    assert ".segments." not in staged and ".adapter." not in staged, staged
    shutil.rmtree(doc)
