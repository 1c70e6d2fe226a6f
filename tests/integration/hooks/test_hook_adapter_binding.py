"""The pre-commit hook checks that the staged records bind the adapter the DVC cache holds
(manifest.json, dvc.lock, the lock's hash), and that the same inputs as HEAD never bring
another adapter under a strong determinism class."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from dlm_git.hashing import canonical_json
from tests.support.gitrepo import git, head
from tests.support.hookrepo import (
    DOC,
    LOCK,
    MANIFEST,
    adapter_md5,
    cache_path,
    commit,
    read,
    refused,
    stage_other_adapter,
    write,
)

pytestmark = pytest.mark.slow


def test_manifest_adapter_sha_edit_is_refused(repo: Path) -> None:
    before = head(repo)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "ab" * 32
    write(repo, MANIFEST, canonical_json(manifest))
    err = refused(commit(repo), repo, before)
    assert re.search(
        rf"dlm-git: ERROR {DOC}: adapter\.sha256: adapter_model\.safetensors sha256 [0-9a-f]{{16}} "
        r"is not manifest\.json's abababababababab \(run `dvc repro`",
        err,
    ), err


def test_dvc_lock_naming_another_object_is_refused(repo: Path) -> None:
    """dvc.lock's adapter md5 pointed at another real directory in the DVC cache."""
    before = head(repo)
    data = read(repo, "dvc.lock")
    adapter = adapter_md5(data)
    tokens = next(
        str(out["md5"])
        for body in yaml.safe_load(data)["stages"].values()
        for out in body.get("outs") or []
        if out["path"] == f"{DOC}/tokens"
    )
    assert cache_path(repo, tokens).is_file()
    write(repo, "dvc.lock", data.replace(adapter.encode(), tokens.encode()))
    err = refused(commit(repo), repo, before)
    assert f"dlm-git: ERROR {DOC}: adapter.files: adapter files [" in err
    recorded = "['README.md', 'adapter_config.json', 'adapter_model.safetensors']"
    assert f"differ from manifest.json's {recorded}" in err


def test_dvc_lock_naming_an_uncached_adapter_is_refused(repo: Path) -> None:
    before = head(repo)
    data = read(repo, "dvc.lock")
    adapter = adapter_md5(data)
    write(repo, "dvc.lock", data.replace(adapter.encode(), b"0123456789abcdef0123456789abcdef.dir"))
    err = refused(commit(repo), repo, before)
    assert (
        "adapter 0123456789abcdef0123456789abcdef.dir named by dvc.lock is not in the DVC cache"
        in err
    )


def test_manifest_lock_sha_mismatch_is_refused(repo: Path) -> None:
    before = head(repo)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["lock_sha256"] = "cd" * 32
    write(repo, MANIFEST, canonical_json(manifest))
    err = refused(commit(repo), repo, before)
    assert (
        f"dlm-git: ERROR {DOC}: lock.binding: manifest.json does not bind the staged dlm.lock"
        " (lock_sha256)"
    ) in err


# --------------------------------------------------------------------------- determinism


def test_same_inputs_different_adapter_is_refused_under_strong(retrained_repo: Path) -> None:
    """What a nondeterministic run looks like: HEAD's inputs, HEAD's lock, but another real
    adapter (the retrained one, in the DVC cache) recorded consistently in manifest.json and
    dvc.lock. Every hash binding holds; only the determinism check can object."""
    repo = retrained_repo
    before = head(repo)
    assert json.loads(git(repo, "show", f"HEAD:{LOCK}"))["determinism_class"] == "strong"
    old_root, new_root = stage_other_adapter(repo)
    err = refused(commit(repo), repo, before)
    lines = [line for line in err.splitlines() if line.startswith("dlm-git: ERROR")]
    assert lines == [
        f"dlm-git: ERROR {DOC}: determinism: same inputs as HEAD but a different adapter "
        f"({old_root[:16]} -> {new_root[:16]}) under the same numerics setup (profile "
        "x86-64-v3, class strong): the training was not reproducible (investigate "
        "nondeterminism: compare `dlm-git doctor` with the lock; see docs/hooks.md)"
    ], err
