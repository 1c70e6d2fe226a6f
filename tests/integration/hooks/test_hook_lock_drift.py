"""The pre-commit hook judges a staged dlm.lock against HEAD's: an ERROR drift is refused
unless the new lock supersedes exactly HEAD's, a WARN drift commits with a warning, and
strict mode (DLM_GIT_STRICT or `dlm-git.strict`) refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlm_git.hashing import canonical_json, sha256_bytes
from tests.support.gitrepo import git, head
from tests.support.hookrepo import (
    DOC,
    LOCK,
    MANIFEST,
    commit,
    passed,
    read,
    rebind,
    refused,
    write,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("field", "value", "shown", "contract"),
    [
        ("base_model_sha256", "0" * 64, "base_model_sha256 changed", "lock.base_model_sha256 vs"),
        ("pinned_versions.torch", "3.0.0", "pinned_versions.torch changed", "did not build base"),
        ("dlm_id", "01M800GRBP0GEV3WAMXAHDD42B", "dlm_id changed", "lock.dlm_id vs manifest"),
    ],
)
def test_lock_drift_error_is_refused(
    repo: Path, field: str, value: str, shown: str, contract: str
) -> None:
    """Re-bound (lock_sha256), the lock edit is the drift and, since the hook runs the
    contract's record checks as verify does, the check that ties the lock to the manifest
    (`lock.fields`) or to the base (`lock.versions`). Before, the drift was all it said."""
    before = head(repo)
    lock = json.loads(read(repo, LOCK))
    key, _, sub = field.partition(".")
    if sub:
        lock[key][sub] = value
    else:
        lock[key] = value
    rebind(repo, lock)
    err = refused(commit(repo), repo, before)
    lines = [line for line in err.splitlines() if line.startswith("dlm-git: ERROR")]
    assert len(lines) == 2, err
    drift = [line for line in lines if ": lock.drift: " in line]
    assert len(drift) == 1 and drift[0].startswith(f"dlm-git: ERROR {DOC}: lock.drift: {shown}: ")
    assert "--update-lock" in drift[0] and "supersedes" in drift[0]
    assert contract in next(line for line in lines if line not in drift), err


def test_lock_edit_without_rebinding_is_refused_twice(repo: Path) -> None:
    before = head(repo)
    lock = json.loads(read(repo, LOCK))
    lock["base_model_sha256"] = "1" * 64
    write(repo, LOCK, canonical_json(lock))
    err = refused(commit(repo), repo, before)
    assert "lock.drift: base_model_sha256 changed" in err
    assert "manifest.json does not bind the staged dlm.lock (lock_sha256)" in err


def _new_dlm_id(repo: Path) -> dict[str, object]:
    """The lock with another `dlm_id` (an ERROR drift), the manifest made to agree with it
    (so `lock.fields` holds): what a retrain of a document given a new id records."""
    lock = json.loads(read(repo, LOCK))
    lock["dlm_id"] = "01M800GRBP0GEV3WAMXAHDD42C"
    manifest = json.loads(read(repo, MANIFEST))
    manifest["dlm_id"] = lock["dlm_id"]
    write(repo, MANIFEST, canonical_json(manifest))
    return lock  # type: ignore[no-any-return]


def test_supersedes_accepts_an_error_drift(repo: Path) -> None:
    before = head(repo)
    lock = _new_dlm_id(repo)
    lock["supersedes"] = sha256_bytes(git(repo, "show", f"HEAD:{LOCK}").encode("utf-8"))
    rebind(repo, lock)
    proc = commit(repo)
    passed(proc, repo, before)
    assert "dlm-git: ERROR" not in proc.stderr


def test_supersedes_of_another_lock_does_not_accept(repo: Path) -> None:
    before = head(repo)
    lock = _new_dlm_id(repo)
    lock["supersedes"] = sha256_bytes(b"some other lock")
    rebind(repo, lock)
    err = refused(commit(repo), repo, before)
    assert "lock.drift: dlm_id changed" in err


def _numpy_drift(repo: Path) -> None:
    lock = json.loads(read(repo, LOCK))
    assert "numpy" in lock["pinned_versions"]
    lock["pinned_versions"]["numpy"] = "0.0.1"
    rebind(repo, lock)


def test_warn_drift_commits_and_prints(repo: Path) -> None:
    before = head(repo)
    _numpy_drift(repo)
    err = passed(commit(repo), repo, before)
    assert f"dlm-git: WARN {DOC}: lock.drift: pinned_versions.numpy changed: " in err
    assert "-> '0.0.1' (allowed; set DLM_GIT_STRICT=1 to refuse)" in err
    assert "dlm-git: 0 error(s), 1 warning(s) in 1 document(s): ok" in err


@pytest.mark.parametrize("how", ["env", "git-config"])
def test_strict_mode_refuses_warn_drift(repo: Path, how: str) -> None:
    before = head(repo)
    _numpy_drift(repo)
    if how == "git-config":
        git(repo, "config", "dlm-git.strict", "true")
        proc = commit(repo)
    else:
        proc = commit(repo, DLM_GIT_STRICT="1")
    err = refused(proc, repo, before)
    assert f"dlm-git: ERROR {DOC}: lock.drift: pinned_versions.numpy changed" in err
    assert "dlm-git: 1 error(s), 0 warning(s)" in err
