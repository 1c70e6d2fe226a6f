"""Adapter forgeries: each must fail `dlm-git verify`, naming the check that caught it.

A mutation of `adapter_model.safetensors` is applied at four depths of consistency:

- `cache`: the DVC cache object the commit points to is overwritten in place;
- `dvc`:   the tampered file is stored properly in DVC (new object, new `.dir`
           listing, dvc.lock updated) and committed; manifest.json is untouched;
- `files`: as `dvc`, and manifest.json re-records the file's sha256 and size;
- `all`:   as `dvc`, and manifest.json re-records the whole adapter record (file
           hashes, tensor names, dtypes, shapes, digests, tensor root), as a retrain
           would. Edits that keep a valid LoRA structure then pass the hash level
           (asserted: hash verification cannot tell) and only replay can catch them
           (test_falsify_replay.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.tensorfiles import MUTATIONS
from tests.support.verdicts import assert_caught, assert_verified
from tests.support.verified import ADAPTER_OUT, CONFIG, DOC, WEIGHTS

pytestmark = pytest.mark.slow


LAYERS = ("cache", "dvc", "files", "all")
# mutation -> first failing check at each layer (None: the hash level passes)
EXPECTED: dict[str, tuple[str | None, ...]] = {
    "weight_edit": ("adapter.sha256", "adapter.sha256", "adapter.tensors", None),
    "ulp_flip": ("adapter.sha256", "adapter.sha256", "adapter.tensors", None),
    "renamed_tensor": ("adapter.sha256", "adapter.sha256", "adapter.tensors", "adapter.structure"),
    "reshaped_tensor": ("adapter.sha256", "adapter.sha256", "adapter.tensors", "adapter.structure"),
    "dtype_relabel": ("adapter.sha256", "adapter.sha256", "adapter.tensors", "adapter.structure"),
}
TENSOR_DETAIL = {
    "weight_edit": "bytes differ",
    "ulp_flip": "bytes differ",
    "renamed_tensor": "tensor names differ",
    "reshaped_tensor": "shape differ",
    "dtype_relabel": "dtype differ",
}


def test_every_mutation_is_covered() -> None:
    assert set(EXPECTED) == set(MUTATIONS)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("mutation", sorted(EXPECTED))
def test_adapter_tamper(forge: Any, mutation: str, layer: str) -> None:
    files = forge.adapter_files()
    tampered = MUTATIONS[mutation](files[WEIGHTS])
    assert tampered != files[WEIGHTS]
    if layer == "cache":
        forge.overwrite_object(forge.listing(forge.out_md5())[WEIGHTS], tampered)
    else:
        rebind = {"dvc": "none", "files": "files", "all": "all"}[layer]
        forge.store_adapter({**files, WEIGHTS: tampered}, rebind=rebind)
        forge.commit(f"{mutation} at layer {layer}")
    result = forge.verify("HEAD")
    expected = EXPECTED[mutation][LAYERS.index(layer)]
    if expected is None:
        # A consistent forgery of manifest + adapter: nothing at the hash level can tell.
        assert_verified(result)
        return
    assert_caught(result, expected)
    if expected == "adapter.tensors":
        assert TENSOR_DETAIL[mutation] in result.first_failure["detail"], result.explain()


@pytest.mark.parametrize(
    ("edit", "value"),
    [("r", 16), ("lora_alpha", 32), ("target_modules", "drop v_proj")],
)
def test_adapter_config_edit_caught_only_by_structure(forge: Any, edit: str, value: Any) -> None:
    from dlm_git.hashing import canonical_json

    files = forge.adapter_files()
    config = json.loads(files[CONFIG])
    if edit == "target_modules":
        assert "v_proj" in config["target_modules"]
        config["target_modules"] = [m for m in config["target_modules"] if m != "v_proj"]
    else:
        assert config[edit] != value
        config[edit] = value
    files[CONFIG] = canonical_json(config)
    forge.store_adapter(files, rebind="files")  # the file hash is re-recorded consistently
    forge.commit(f"adapter_config {edit}")
    result = forge.verify("HEAD")
    assert_caught(result, "adapter.structure")
    assert f"adapter_config {edit}" in result.first_failure["detail"], result.explain()
    for bound in ("adapter.files", "adapter.sha256", "adapter.tensors", "dvc.binding"):
        assert result.check(bound)["ok"], result.explain()


def test_adapter_config_edit_unbound(forge: Any) -> None:
    files = forge.adapter_files()
    config = json.loads(files[CONFIG])
    config["lora_alpha"] = 32
    files[CONFIG] = json.dumps(config).encode()
    forge.store_adapter(files)
    forge.commit("adapter_config edit, manifest untouched")
    assert_caught(forge.verify("HEAD"), "adapter.sha256")


@pytest.mark.parametrize("change", ["extra", "missing"])
def test_adapter_file_set_via_forged_dvc_listing(forge: Any, change: str) -> None:
    """A forged `.dir` listing in the DVC cache, and dvc.lock pointing at it."""
    files = forge.adapter_files()
    if change == "extra":
        files["NOTES.md"] = b"# not part of the adapter\n"  # README.md is the card
    else:
        del files[CONFIG]
    forge.store_adapter(files)
    forge.commit(f"{change} adapter file")
    result = forge.verify("HEAD")
    assert_caught(result, "adapter.files")
    word = "NOTES.md" if change == "extra" else CONFIG
    assert word in result.first_failure["detail"]


def test_missing_config_with_rebound_manifest(forge: Any) -> None:
    """adapter_config.json dropped from DVC *and* from the manifest's adapter record."""
    files = forge.adapter_files()
    del files[CONFIG]
    forge.store_adapter(files, rebind="all")
    forge.commit("adapter without its config, manifest re-recorded")
    result = forge.verify("HEAD")
    assert_caught(result, "adapter.structure")
    assert CONFIG in result.first_failure["detail"]


@pytest.mark.parametrize("change", ["extra", "missing"])
def test_adapter_file_set_in_worktree(forge: Any, change: str) -> None:
    """`verify --worktree`: the work tree's adapter/ against the manifest."""
    assert_verified(forge.verify("--worktree", "--doc", DOC))
    adapter = forge.root / ADAPTER_OUT
    if change == "extra":
        (adapter / "NOTES.md").write_text("# not part of the adapter\n")  # README.md: the card
    else:
        (adapter / CONFIG).unlink()
    result = forge.verify("--worktree", "--doc", DOC)
    assert_caught(result, "adapter.files")


def test_listing_entries_outside_adapter_are_never_written(forge: Any, tmp_path: Path) -> None:
    """A forged listing naming paths outside adapter/: verify writes nothing there and
    fails (dvc.binding: the listing is not the adapter directory)."""
    escaped = [tmp_path / "escaped-abs", tmp_path / "escaped-rel"]
    files = forge.adapter_files()
    entries = {name: forge.put_object(data) for name, data in files.items()}
    payload = forge.put_object(b"written outside the adapter\n")
    entries[str(escaped[0])] = payload
    entries["../" * 40 + str(escaped[1]).lstrip("/")] = payload
    forge.set_out_md5(ADAPTER_OUT, forge.put_listing(entries), None, len(entries))
    forge.commit("listing with path traversal")
    result = forge.verify("HEAD")
    assert not any(p.exists() for p in escaped)
    assert_caught(result, "dvc.binding")


def test_missing_weights_with_rebound_manifest(forge: Any) -> None:
    """adapter_model.safetensors dropped from DVC and from the manifest's file list."""
    files = forge.adapter_files()
    del files[WEIGHTS]
    forge.store_adapter(files)
    manifest = forge.manifest()
    del manifest["adapter"]["files"][WEIGHTS]
    forge.write_manifest(manifest)
    forge.commit("adapter without weights, manifest re-recorded")
    result = forge.verify("HEAD")
    assert_caught(result, "adapter.sha256")
    assert "Traceback" not in result.stderr
    for later in ("adapter.tensors", "adapter.structure"):
        assert not result.check(later)["ok"], result.explain()
