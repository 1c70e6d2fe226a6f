"""Manifest forgeries the hash level passed (review stop 40, findings 2, 4, 5 and 6): each
is made consistent up to every hash the commit records (digests re-bound, dvc.lock and
eval record kept current) and must fail `dlm-git verify` at the hash level, naming the
check that caught it. On 96a5324 every one of them was VERIFIED.

- A `training_config` value nested past `validated.MAX_ANY_DEPTH`: the shape took it, the
  replay's schema refused it (and the replay then compared only the weights).
- A recorded `base.kind` switched what `lock.versions` compares: `hf` beside the spec
  `builtin:tiny` skipped re-deriving the tiny base's revision from forged versions.
- A file no training writes, bound in the manifest and dvc.lock, passed `adapter.files`.
- A tensor listed twice was collapsed into a mapping: a false entry before the true one
  was never compared.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dlm_git.hashing import canonical_json_sha256
from dlm_git.validated import MAX_ANY_DEPTH
from tests.support.verdicts import assert_caught
from tests.support.verified import DOC

pytestmark = pytest.mark.slow


def test_a_training_config_nested_past_the_schema_bound_fails_manifest_parse(forge: Any) -> None:
    manifest = forge.manifest()
    deep: Any = "x"
    for _ in range(MAX_ANY_DEPTH + 1):
        deep = [deep]
    manifest["training_config"]["note"] = deep
    manifest["config_sha256"] = canonical_json_sha256(manifest["training_config"])
    data = forge.write_canonical(f"{DOC}/manifest.json", manifest)  # the schema refuses it
    forge.rebind_eval(data)
    forge.sync_dvc_lock_files()
    forge.commit("training_config nested past the bound, digest re-bound")
    result = forge.verify("HEAD")
    assert_caught(result, "manifest.parse")
    detail = result.first_failure["detail"] if result.first_failure else ""
    assert f"training_config.note is nested more than {MAX_ANY_DEPTH} levels deep" in detail


def test_a_training_config_key_with_a_lone_surrogate_fails_manifest_parse(forge: Any) -> None:
    """`"note\\ud800"` is legal JSON but no text: no digest can be re-bound around it, and
    verify says so in one line (it raised UnicodeEncodeError computing the config digest)."""
    data = forge.read(f"{DOC}/manifest.json")
    forged = data.replace(b'"training_config": {', b'"training_config": {"note\\ud800": 1,', 1)
    assert forged != data
    forge.write(f"{DOC}/manifest.json", forged)
    forge.commit("a training_config key that is no text")
    result = forge.verify("HEAD")
    assert_caught(result, "manifest.parse")
    detail = result.first_failure["detail"] if result.first_failure else ""
    assert "surrogate" in detail, detail


def forged_versions(forge: Any) -> None:
    """The lock names library versions that never built the recorded tiny base (re-bound)."""
    lock = forge.lock()
    lock["pinned_versions"]["torch"] = "3.0.0+cpu"
    lock["pinned_versions"]["transformers"] = "9.9.9"
    forge.write_lock(lock)


@pytest.mark.parametrize("kind", ["builtin", "hf", "local"])
def test_lock_versions_takes_the_kind_from_the_spec(forge: Any, kind: str) -> None:
    forged_versions(forge)
    manifest = forge.manifest()
    manifest["base"]["kind"] = kind
    forge.write_manifest(manifest)
    forge.commit(f"lock versions forged, base.kind {kind}")
    result = forge.verify("HEAD")
    assert_caught(result, "lock.versions")
    assert "did not build base revision" in result.check("lock.versions")["detail"]
    assert result.check("doc.base_model")["ok"] is (kind == "builtin"), result.explain()


@pytest.mark.parametrize("kind", ["hf", "local", "tiny"])
def test_a_recorded_kind_that_is_not_the_spec_s_fails_doc_base_model(forge: Any, kind: str) -> None:
    manifest = forge.manifest()
    manifest["base"]["kind"] = kind
    forge.write_manifest(manifest)
    forge.commit(f"base.kind {kind} beside builtin:tiny")
    result = forge.verify("HEAD")
    assert_caught(result, "doc.base_model")
    detail = result.check("doc.base_model")["detail"]
    assert f"base.kind '{kind}' is not the kind of base_model 'builtin:tiny' (builtin)" in detail


@pytest.mark.parametrize("name", ["payload.py", "NOTES.md", "adapter_model.bin"])
def test_an_adapter_file_no_training_writes_is_refused_though_bound(forge: Any, name: str) -> None:
    files = forge.adapter_files()
    files[name] = b"import os\nos.system('echo pwned')\n"
    forge.store_adapter(files, rebind="files")  # manifest, dvc.lock and listing all bind it
    forge.commit(f"{name} in the adapter, bound")
    result = forge.verify("HEAD")
    assert_caught(result, "adapter.files")
    assert (
        f"adapter file '{name}' is none a training writes"
        in result.check("adapter.files")["detail"]
    )


@pytest.mark.parametrize("entry", ["false first", "a copy"])
def test_a_tensor_listed_twice_fails_manifest_parse(forge: Any, entry: str) -> None:
    manifest = forge.manifest()
    tensors = manifest["adapter"]["tensors"]
    true = copy.deepcopy(tensors[0])
    if entry == "false first":
        tensors.insert(0, dict(true, digest="0" * 64, shape=[1, 1], dtype="I8"))
    else:
        tensors.append(true)
    forge.write_manifest(manifest)
    forge.commit(f"a tensor listed twice ({entry})")
    result = forge.verify("HEAD")
    assert_caught(result, "manifest.parse")
    assert f"{true['name']!r:.60} is listed twice" in result.check("manifest.parse")["detail"]
