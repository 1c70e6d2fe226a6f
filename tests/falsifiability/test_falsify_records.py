"""Record forgeries (lock, manifest, document, sources, dvc.lock, base): each must fail
`dlm-git verify`, naming the check that caught it; a clean commit must verify."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.tensorfiles import patch_tensor, tensor_names
from tests.support.verdicts import assert_caught, assert_verified
from tests.support.verified import ADAPTER_OUT, DOC, EXTRA_QA, FIRST_QA

pytestmark = pytest.mark.slow

HASH_CHECKS = [
    "pipeline.documents",
    "docset.dlm_id",
    "manifest.parse",
    "lock.parse",
    "lock.binding",
    "lock.fields",
    "lock.versions",
    "doc.sha256",
    "doc.base_model",
    "config.digest",
    "params.training",
    "sources.root",
    "sections.order",
    "adapter.files",
    "adapter.sha256",
    "adapter.tensors",
    "adapter.structure",
    "base.identity",
    "dvc.binding",
    "eval.binding",
]
WORKTREE_CHECKS = [c for c in HASH_CHECKS if c != "pipeline.documents"]


def test_clean_commit_verifies(forge: Any) -> None:
    result = forge.verify("HEAD")
    assert_verified(result)
    assert result.verdict == "VERIFIED"
    assert [c["name"] for c in result.checks] == HASH_CHECKS


def test_clean_worktree_verifies(forge: Any) -> None:
    result = forge.verify("--worktree", "--doc", DOC)
    assert_verified(result)
    assert [c["name"] for c in result.checks] == WORKTREE_CHECKS


def test_every_check_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "verify.md").read_text("utf-8")
    for name in [*HASH_CHECKS, "replay", "replay.versions", "segments.chain", "segments.replay"]:
        assert f"`{name}`" in doc, f"docs/verify.md does not describe check {name}"


@pytest.mark.parametrize("what", ["weights", "tokenizer", "config"])
def test_base_swapped(
    forge: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, what: str
) -> None:
    """The base that verify finds here is not the one training recorded."""
    from dlm_git.base.tiny import tiny_dir

    src = tiny_dir()
    cache = tmp_path / "base-cache"
    shutil.copytree(src, cache / src.name)
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(cache))
    base = tiny_dir()
    assert base == cache / src.name
    if what == "weights":
        blob = (base / "model.safetensors").read_bytes()
        forged = patch_tensor(
            blob, tensor_names(blob)[-1], lambda a: a.__setitem__((0,) * a.ndim, 0.5)
        )
        assert forged != blob
        (base / "model.safetensors").write_bytes(forged)
    elif what == "tokenizer":
        config = json.loads((base / "tokenizer_config.json").read_text())
        config["model_max_length"] = 4096
        (base / "tokenizer_config.json").write_text(json.dumps(config))
    else:  # same weights and tokenizer, another model: silu -> relu
        config = json.loads((base / "config.json").read_text())
        assert config["hidden_act"] == "silu"
        config["hidden_act"] = "relu"
        (base / "config.json").write_text(json.dumps(config))
    result = forge.verify("HEAD")
    assert_caught(result, "base.identity")
    expected = {"weights": "tensor root", "tokenizer": "tokenizer", "config": "config.json"}
    assert expected[what] in result.first_failure["detail"], result.explain()


def test_wrong_seed_in_lock(forge: Any) -> None:
    lock = forge.lock()
    lock["seed"] += 1
    forge.write_lock(lock)  # manifest.lock_sha256 re-bound
    forge.commit("seed")
    result = forge.verify("HEAD")
    assert_caught(result, "lock.fields")
    assert "seed" in result.first_failure["detail"]


def test_lock_edit_without_rebinding(forge: Any) -> None:
    lock = forge.lock()
    lock["seed"] += 1
    forge.write_lock(lock, rebind=False)
    forge.commit("seed, manifest not re-bound")
    assert_caught(forge.verify("HEAD"), "lock.binding")


def test_torch_major_changed_in_lock(forge: Any) -> None:
    """A lock claiming another torch major. Nothing binds a version to the adapter bytes,
    but for the builtin base the base revision names the versions that built it (and so
    trained the adapter): `lock.versions` re-derives it and catches the claim."""
    lock = forge.lock()
    assert not lock["pinned_versions"]["torch"].startswith("3.")
    lock["pinned_versions"]["torch"] = "3.0.0"
    forge.write_lock(lock)
    forge.commit("torch 3")
    result = forge.verify("HEAD")
    assert_caught(result, "lock.versions")
    assert result.check("lock.binding")["ok"] and result.check("lock.fields")["ok"]
    assert "torch 3.0.0" in result.first_failure["detail"]
    # replay refuses a replay across torch majors (no training is attempted)
    replay = forge.verify("HEAD", "--level", "replay")
    assert_caught(replay, "lock.versions")
    versions = replay.check("replay.versions")
    assert not versions["ok"] and "torch major" in versions["detail"], replay.explain()
    assert "replay" not in [c["name"] for c in replay.checks]


@pytest.mark.parametrize("change", ["edited", "added", "removed"])
def test_source_changed_after_training(forge: Any, change: str) -> None:
    notes = forge.root / DOC / "notes"
    existing = sorted(p for p in notes.iterdir() if p.is_file())
    assert existing
    if change == "edited":
        existing[0].write_text(existing[0].read_text() + "\nOne more line.\n")
    elif change == "added":
        (notes / "later.md").write_text("# Written after training\n")
    else:
        for p in existing:
            p.unlink()
        (notes / "unrelated.bin").write_bytes(b"\x00")  # keep the dir; not a source
    forge.commit(f"source {change}")
    result = forge.verify("HEAD")
    assert_caught(result, "sources.root")


def test_sections_reordered(forge: Any) -> None:
    """Two Q/A pairs swapped; manifest.dlm_sha256, lock.dlm_sha256 and lock_sha256 all
    re-bound to the new bytes, so only the section order can tell."""

    rel = f"{DOC}/{DOC}.dlm"
    text = forge.read(rel).decode()
    first, second = FIRST_QA, EXTRA_QA.strip("\n") + "\n"
    assert first in text and second in text
    swapped = text.replace(first, "\0").replace(second, first).replace("\0", second)
    assert swapped != text and sorted(swapped) == sorted(text)
    forge.rebind_document(swapped)
    forge.commit("sections reordered")
    result = forge.verify("HEAD")
    assert_caught(result, "sections.order")
    assert "order" in result.first_failure["detail"]
    for bound in ("lock.binding", "lock.fields", "doc.sha256", "sources.root"):
        assert result.check(bound)["ok"], result.explain()


def test_dvc_lock_points_at_missing_object(forge: Any) -> None:
    """dvc.lock's adapter md5 edited to an object this machine does not have: the commit
    cannot be verified here (exit 1), and the report says what to fetch."""
    md5 = forge.out_md5()
    forged = ("0" if md5[0] != "0" else "1") + md5[1:]
    forge.set_out_md5(ADAPTER_OUT, forged, None, None)
    forge.commit("dvc.lock md5")
    result = forge.verify("HEAD")
    assert_caught(result, "adapter.files", verdicts=("CANNOT_VERIFY",))
    assert forged in result.first_failure["detail"] and "dvc" in result.first_failure["detail"]


def test_dvc_lock_points_at_other_object(forge: Any) -> None:
    """dvc.lock's adapter md5 edited to another directory the cache does hold."""
    forge.set_out_md5(ADAPTER_OUT, forge.out_md5(f"{DOC}/tokens"), None, None)
    forge.commit("dvc.lock md5 -> tokens")
    assert_caught(forge.verify("HEAD"), "adapter.files")


def test_dvc_lock_edited_worktree(forge: Any) -> None:
    """`verify --worktree`: adapter/ and manifest intact, dvc.lock's record of adapter/
    edited (a listing whose weights md5 names other bytes) → only dvc.binding can tell."""
    listing = forge.listing(forge.out_md5())
    listing["adapter_model.safetensors"] = forge.put_object(b"not the adapter")
    forge.set_out_md5(ADAPTER_OUT, forge.put_listing(listing), None, None)
    result = forge.verify("--worktree", "--doc", DOC)
    assert_caught(result, "dvc.binding")
    assert "adapter_model.safetensors" in result.first_failure["detail"]
