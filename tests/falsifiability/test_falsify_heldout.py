"""Forged held-out splits: a lock or a manifest config that claims a split the other
record does not is FAILED at the hash level (`lock.fields`), whatever else was re-bound.
(A split the document and both records agree on but the adapter was not trained with is
the replay's to catch: tests/integration/test_train_heldout.py replays an honest one.)"""

from __future__ import annotations

from typing import Any

from dlm_git.hashing import canonical_json_sha256
from tests.support.verdicts import assert_caught


def test_a_lock_claiming_a_split_the_manifest_lacks(forge: Any) -> None:
    lock = forge.lock()
    lock["val_fraction"] = 0.25
    forge.write_lock(lock)  # manifest.lock_sha256 re-bound
    forge.commit("a split only the lock claims")
    result = forge.verify("HEAD")
    assert_caught(result, "lock.fields")
    assert "val_fraction" in result.first_failure["detail"], result.explain()


def test_a_manifest_config_claiming_a_split_the_lock_lacks(forge: Any) -> None:
    manifest = forge.manifest()
    manifest["training_config"]["val_fraction"] = 0.25
    manifest["config_sha256"] = canonical_json_sha256(manifest["training_config"])
    forge.write_manifest(manifest)
    forge.commit("a split only the manifest claims")
    result = forge.verify("HEAD")
    check = result.check("lock.fields")
    assert result.code == 1 and not check["ok"], result.explain()
    assert "val_fraction" in check["detail"], result.explain()


def test_a_lock_recording_a_split_that_no_dlm_git_writes(forge: Any) -> None:
    lock = forge.lock()
    lock["val_fraction"] = 1.0
    forge.write_lock(lock)
    forge.commit("a fraction out of range")
    assert_caught(forge.verify("HEAD"), "lock.parse")
