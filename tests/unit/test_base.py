"""Base models: spec parsing, the registry, locating and resolving bases, base identity."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from dlm_git.base.errors import BaseModelError, BaseNotAvailableError
from dlm_git.base.registry import REGISTRY, RegistryEntry
from dlm_git.base.resolve import (
    base_identity,
    hf_cache_root,
    locate_base,
    resolve_base,
    tokenizer_sha256,
)
from dlm_git.base.spec import REV_RE, BaseSpec, parse_base_spec
from dlm_git.errors import DlmGitError
from dlm_git.hashing import canonical_json_sha256, digest_tensor_bytes, tensor_root

REV = "0123456789abcdef0123456789abcdef01234567"
REV2 = "fedcba9876543210fedcba9876543210fedcba98"
SMOLLM2_135M_PIN = "12fd25f77366fa6b3b4b768ec3050bf629380bac"
UNPINNED = "unpinned-key"  # a registry entry whose revision could not be confirmed

ORIGINAL_DLM_KEYS = [
    "smollm2-135m",
    "smollm2-360m",
    "smollm2-1.7b",
    "qwen2.5-1.5b",
    "qwen2.5-3b",
    "qwen2.5-coder-1.5b",
]


# --- spec parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("builtin:tiny", BaseSpec("builtin", "builtin:tiny", "tiny")),
        ("  builtin:tiny  ", BaseSpec("builtin", "builtin:tiny", "tiny")),
        (f"hf:org/name@{REV}", BaseSpec("hf", f"hf:org/name@{REV}", "org/name", REV)),
        (
            f"hf:Qwen/Qwen2.5-0.5B-Instruct@{REV}",
            BaseSpec(
                "hf", f"hf:Qwen/Qwen2.5-0.5B-Instruct@{REV}", "Qwen/Qwen2.5-0.5B-Instruct", REV
            ),
        ),
        ("./bases/mine", BaseSpec("local", "./bases/mine", "./bases/mine")),
        ("bases/mine", BaseSpec("local", "bases/mine", "bases/mine")),
        ("../mine", BaseSpec("local", "../mine", "../mine")),
        ("/opt/models/base", BaseSpec("local", "/opt/models/base", "/opt/models/base")),
        (
            "smollm2-135m",
            BaseSpec(
                "hf",
                "smollm2-135m",
                "HuggingFaceTB/SmolLM2-135M-Instruct",
                SMOLLM2_135M_PIN,
                registry_key="smollm2-135m",
            ),
        ),
    ],
)
def test_parse_base_spec_accepted(value: str, expected: BaseSpec) -> None:
    assert parse_base_spec(value) == expected


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("builtin:huge", "unknown builtin base 'builtin:huge'"),
        ("builtin:", "unknown builtin base"),
        ("hf:org/name", "must pin a 40-hex commit revision"),
        ("hf:org/name@", "must pin a 40-hex commit revision"),
        ("hf:org/name@0123abc", "must pin a 40-hex commit revision"),
        ("hf:org/name@main", "must pin a 40-hex commit revision"),
        ("hf:org/name@v1.0", "must pin a 40-hex commit revision"),
        (f"hf:org/name@{REV.upper()}", "must pin a 40-hex commit revision"),
        (f"hf:org/name@{REV}0", "must pin a 40-hex commit revision"),
        (f"hf:noslash@{REV}", "is not of the form hf:<org>/<name>@<revision>"),
        (f"hf:org/name/extra@{REV}", "is not of the form"),
        (f"hf:org/name@{REV}@{REV}", "is not of the form"),
        ("llama-7b", "unknown base model 'llama-7b'"),
        ("SmolLM2-135M", "unknown base model"),
        ("tiny", "unknown base model 'tiny'"),
    ],
)
def test_parse_base_spec_errors(value: str, needle: str) -> None:
    with pytest.raises(BaseModelError) as info:
        parse_base_spec(value)
    text = str(info.value)
    assert text.startswith("base_model: "), text
    assert needle in text
    assert info.value.exit_code == 1


def test_unknown_key_hint_lists_registry() -> None:
    with pytest.raises(BaseModelError) as info:
        parse_base_spec("llama-7b")
    assert info.value.hint is not None
    for key in ORIGINAL_DLM_KEYS:
        assert key in info.value.hint


@pytest.mark.parametrize("key", ORIGINAL_DLM_KEYS)
def test_registry_keys_map_to_hf_specs(key: str) -> None:
    spec = parse_base_spec(key)
    assert spec.kind == "hf"
    assert spec.registry_key == key
    assert spec.raw == key
    assert spec.name == REGISTRY[key].repo_id
    assert spec.revision == REGISTRY[key].revision  # the original tool's pin, cited
    assert spec.revision is not None and REV_RE.fullmatch(spec.revision)


def test_registry_repo_ids() -> None:
    assert {k: e.repo_id for k, e in REGISTRY.items() if k in ORIGINAL_DLM_KEYS} == {
        "smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "smollm2-360m": "HuggingFaceTB/SmolLM2-360M-Instruct",
        "smollm2-1.7b": "HuggingFaceTB/SmolLM2-1.7B-Instruct",
        "qwen2.5-1.5b": "Qwen/Qwen2.5-1.5B-Instruct",
        "qwen2.5-3b": "Qwen/Qwen2.5-3B-Instruct",
        "qwen2.5-coder-1.5b": "Qwen/Qwen2.5-Coder-1.5B-Instruct",
    }


# --- helpers: a fake Hugging Face cache ------------------------------------------------------

TENSORS = {
    "model.embed_tokens.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
    "lm_head.bias": np.array([1.5, -2.0, 0.25], dtype=np.float32),
}
TOKENIZER_JSON = b'{"version": "1.0", "model": {"type": "BPE"}}\n'


def write_model_dir(
    directory: Path,
    tensors: dict[str, np.ndarray] | None = None,
    chat_template: str = "{{ messages }}",
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    save_file(dict(TENSORS if tensors is None else tensors), str(directory / "model.safetensors"))
    (directory / "tokenizer.json").write_bytes(TOKENIZER_JSON)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": chat_template}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    return directory


def fake_hf_snapshot(hub: Path, repo_id: str, revision: str, *, main: bool = True) -> Path:
    repo_dir = hub / ("models--" + repo_id.replace("/", "--"))
    snap = write_model_dir(repo_dir / "snapshots" / revision)
    if main:
        (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
        (repo_dir / "refs" / "main").write_text(revision + "\n", "utf-8")
    return snap


def expected_tensor_root(tensors: dict[str, np.ndarray]) -> str:
    digests = [
        digest_tensor_bytes(name, "F32", arr.shape, np.ascontiguousarray(arr).tobytes())
        for name, arr in tensors.items()
    ]
    return tensor_root(digests)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "hub"
    path.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(path))
    return path


# --- locating and resolving hf bases ---------------------------------------------------------


def test_hf_cache_root_env_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hf_cache_root() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "explicit"))
    assert hf_cache_root() == tmp_path / "explicit"


def test_missing_hf_snapshot_not_available(hub: Path, tmp_path: Path) -> None:
    value = f"hf:org/name@{REV}"
    located = locate_base(value, tmp_path)
    assert located.available is False
    assert located.revision == REV
    assert located.path == hub / "models--org--name" / "snapshots" / REV
    assert REV in located.note

    with pytest.raises(BaseNotAvailableError) as info:
        resolve_base(value, tmp_path)
    exc = info.value
    assert isinstance(exc, BaseModelError) and isinstance(exc, DlmGitError)
    assert exc.exit_code == 1
    assert exc.message.startswith(f"base '{value}' is not available")
    assert REV in exc.message
    assert exc.hint is not None
    assert f"hf download org/name --revision {REV}" in exc.hint
    assert str(exc).startswith("base_model: ")
    assert "\n" not in str(exc)


def test_missing_registry_base_not_available(hub: Path, tmp_path: Path) -> None:
    located = locate_base("smollm2-135m", tmp_path)
    snapshot = hub / "models--HuggingFaceTB--SmolLM2-135M-Instruct" / "snapshots"
    assert (located.available, located.revision) == (False, SMOLLM2_135M_PIN)
    assert located.path == snapshot / SMOLLM2_135M_PIN
    assert str(hub / "models--HuggingFaceTB--SmolLM2-135M-Instruct") in located.note
    with pytest.raises(BaseNotAvailableError) as info:
        resolve_base("smollm2-135m", tmp_path)
    hint = info.value.hint
    assert hint is not None and "<revision>" not in hint
    pinned = REGISTRY["smollm2-135m"].revision
    # the download fits the spec form: a registry key names its pin, or none (refs/main)
    command = "hf download HuggingFaceTB/SmolLM2-135M-Instruct"
    assert f"`{command}{f' --revision {pinned}' if pinned else ''}`" in hint
    assert "HF_HUB_CACHE" in hint


def test_other_revision_in_cache_does_not_satisfy_pin(hub: Path, tmp_path: Path) -> None:
    fake_hf_snapshot(hub, "org/name", REV2)
    located = locate_base(f"hf:org/name@{REV}", tmp_path)
    assert located.available is False
    assert located.revision == REV


def test_fake_hf_cache_resolves_with_identity(hub: Path, tmp_path: Path) -> None:
    snap = fake_hf_snapshot(hub, "org/name", REV)
    fake_hf_snapshot(hub, "org/name", REV2, main=False)
    located = locate_base(f"hf:org/name@{REV}", tmp_path)
    assert (located.available, located.path, located.revision) == (True, snap, REV)

    resolved = resolve_base(f"hf:org/name@{REV}", tmp_path)
    assert resolved.path == snap
    ident = resolved.identity
    assert ident.revision == REV
    assert ident.weight_files == ("model.safetensors",)
    assert ident.tensor_root == expected_tensor_root(TENSORS)
    config = (snap / "tokenizer_config.json").read_bytes()
    assert ident.tokenizer_sha256 == canonical_json_sha256(
        {
            "tokenizer.json": hashlib.sha256(TOKENIZER_JSON).hexdigest(),
            "tokenizer_config.json": hashlib.sha256(config).hexdigest(),
        }
    )


def test_registry_key_resolves_to_its_pin_never_refs_main(hub: Path, tmp_path: Path) -> None:
    pinned = fake_hf_snapshot(hub, "HuggingFaceTB/SmolLM2-135M-Instruct", SMOLLM2_135M_PIN)
    fake_hf_snapshot(hub, "HuggingFaceTB/SmolLM2-135M-Instruct", REV)  # refs/main: another
    located = locate_base("smollm2-135m", tmp_path)
    assert (located.available, located.path, located.revision) == (
        True,
        pinned,
        SMOLLM2_135M_PIN,
    )
    resolved = resolve_base("smollm2-135m", tmp_path)
    assert resolved.identity.revision == SMOLLM2_135M_PIN
    assert resolved.spec.registry_key == "smollm2-135m"


def test_an_unpinned_registry_key_resolves_via_refs_main(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(REGISTRY, UNPINNED, RegistryEntry("org/name", None, "apache-2.0"))
    snap = fake_hf_snapshot(hub, "org/name", REV)
    fake_hf_snapshot(hub, "org/name", REV2, main=False)
    located = locate_base(UNPINNED, tmp_path)
    assert (located.available, located.path, located.revision) == (True, snap, REV)
    # moving refs/main moves an unpinned key (the lock is what pins it)
    (hub / "models--org--name" / "refs" / "main").write_text(REV2, "utf-8")
    assert locate_base(UNPINNED, tmp_path).revision == REV2


def test_refs_main_pointing_at_missing_snapshot(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(REGISTRY, UNPINNED, RegistryEntry("org/name", None, "apache-2.0"))
    repo_dir = hub / "models--org--name"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(REV, "utf-8")
    located = locate_base(UNPINNED, tmp_path)
    assert (located.available, located.revision) == (False, REV)
    with pytest.raises(BaseNotAvailableError) as info:
        resolve_base(UNPINNED, tmp_path)
    assert REV in str(info.value)


# --- local bases -----------------------------------------------------------------------------


def test_local_directory_relative_to_document(tmp_path: Path) -> None:
    doc_dir = tmp_path / "repo" / "docs"
    base = write_model_dir(doc_dir / "bases" / "mine")
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)  # the cwd must not matter
        located = locate_base("./bases/mine", doc_dir, tmp_path / "repo")
        assert (located.available, located.path, located.revision) == (
            True,
            doc_dir / "./bases/mine",
            None,
        )
        resolved = resolve_base("bases/mine", doc_dir)
    finally:
        os.chdir(cwd)
    assert resolved.path.resolve() == base.resolve()
    assert resolved.identity.revision is None
    assert resolved.identity.tensor_root == expected_tensor_root(TENSORS)


def test_local_directory_falls_back_to_repo_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    base = write_model_dir(repo / "shared" / "base")
    located = locate_base("./shared/base", repo / "docs", repo)
    assert located.available and located.path == repo / "./shared/base"
    assert located.path.resolve() == base.resolve()


def test_missing_local_directory(tmp_path: Path) -> None:
    located = locate_base("./nope", tmp_path)
    assert (located.available, located.path) == (False, tmp_path / "./nope")
    with pytest.raises(BaseNotAvailableError) as info:
        resolve_base("./nope", tmp_path)
    assert "local directory does not exist" in str(info.value)


class _Trap:
    """Unpickling this touches a marker file: proof that a pickle was (not) loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_pickle_weights_refused_never_loaded(tmp_path: Path) -> None:
    base = tmp_path / "pt-base"
    base.mkdir()
    marker = tmp_path / "UNPICKLED"
    (base / "pytorch_model.bin").write_bytes(pickle.dumps(_Trap(marker)))
    (base / "tokenizer.json").write_bytes(TOKENIZER_JSON)
    with pytest.raises(BaseModelError) as info:
        resolve_base("./pt-base", tmp_path)
    exc = info.value
    assert not isinstance(exc, BaseNotAvailableError)
    assert str(exc).startswith(f"{base}: no *.safetensors weights (found pytorch_model.bin)")
    assert exc.hint is not None and "pickle" in exc.hint
    assert not marker.exists()


def test_no_tokenizer_files(tmp_path: Path) -> None:
    base = tmp_path / "b"
    base.mkdir()
    save_file(dict(TENSORS), str(base / "model.safetensors"))
    with pytest.raises(BaseModelError) as info:
        base_identity(base, None)
    assert "no tokenizer files" in str(info.value)


# --- identity --------------------------------------------------------------------------------


def test_tokenizer_sha256_changes_with_chat_template(tmp_path: Path) -> None:
    a = write_model_dir(tmp_path / "a", chat_template="{{ messages }}")
    b = write_model_dir(tmp_path / "b", chat_template="{{ messages | tojson }}")
    c = write_model_dir(tmp_path / "c", chat_template="{{ messages }}")
    assert tokenizer_sha256(a) == tokenizer_sha256(c)
    assert tokenizer_sha256(a) != tokenizer_sha256(b)
    ia, ib = base_identity(a, None), base_identity(b, None)
    assert ia.tensor_root == ib.tensor_root
    assert ia.tokenizer_sha256 != ib.tokenizer_sha256


def test_tokenizer_sha256_covers_extra_tokenizer_files(tmp_path: Path) -> None:
    a = write_model_dir(tmp_path / "a")
    before = tokenizer_sha256(a)
    (a / "chat_template.jinja").write_text("{{ x }}", "utf-8")
    assert tokenizer_sha256(a) != before
    (a / "README.md").write_text("not a tokenizer file", "utf-8")
    (a / "chat_template.jinja").unlink()
    assert tokenizer_sha256(a) == before


def test_tensor_root_changes_with_one_value(tmp_path: Path) -> None:
    changed = dict(TENSORS)
    bias = TENSORS["lm_head.bias"].copy()
    bias[1] = np.nextafter(bias[1], np.float32(0))
    changed["lm_head.bias"] = bias
    a = base_identity(write_model_dir(tmp_path / "a"), None)
    b = base_identity(write_model_dir(tmp_path / "b", changed), None)
    assert a.tokenizer_sha256 == b.tokenizer_sha256
    assert a.tensor_root != b.tensor_root
    assert b.tensor_root == expected_tensor_root(changed)


def test_sharded_weights_cover_every_tensor(tmp_path: Path) -> None:
    base = write_model_dir(tmp_path / "sharded")
    (base / "model.safetensors").unlink()
    save_file(
        {"model.embed_tokens.weight": TENSORS["model.embed_tokens.weight"]},
        str(base / "model-00001-of-00002.safetensors"),
    )
    save_file(
        {"lm_head.bias": TENSORS["lm_head.bias"]}, str(base / "model-00002-of-00002.safetensors")
    )
    ident = base_identity(base, None)
    assert ident.weight_files == (
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    )
    # the same tensors in one file give the same root
    assert ident.tensor_root == expected_tensor_root(TENSORS)


def test_duplicate_tensor_across_shards_is_an_error(tmp_path: Path) -> None:
    base = write_model_dir(tmp_path / "dup")
    save_file({"lm_head.bias": TENSORS["lm_head.bias"]}, str(base / "extra.safetensors"))
    with pytest.raises(BaseModelError) as info:
        base_identity(base, None)
    assert "weights are inconsistent" in str(info.value)
    assert "lm_head.bias" in str(info.value)


def test_builtin_tiny_is_located_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "bases"
    monkeypatch.setenv("DLM_GIT_BASE_CACHE", str(cache))
    located = locate_base("builtin:tiny", tmp_path)
    assert located.available is True
    assert located.path is not None and located.path.parent == cache
    assert located.revision is not None and located.path.name == located.revision
    assert located.revision.startswith("tiny-") and len(located.revision) == len("tiny-") + 16
    assert not cache.exists()  # locating never builds


def test_refs_main_holding_no_revision_is_not_a_path(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(REGISTRY, UNPINNED, RegistryEntry("org/name", None, "apache-2.0"))
    repo_dir = hub / "models--org--name"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text("../../../etc\n", "utf-8")
    located = locate_base(UNPINNED, tmp_path)
    assert (located.available, located.path, located.revision) == (False, None, None)
    with pytest.raises(BaseNotAvailableError, match="40-hex"):
        resolve_base(UNPINNED, tmp_path)


def test_auto_targets_are_each_familys_block_linears() -> None:
    """Llama/Qwen2 projections, GPT-NeoX's fused names, GPT-2's Conv1D; never the head."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from dlm_git.train.assemble import resolve_targets

    def targets(model_type: str, **config: object) -> list[str]:
        cfg = AutoConfig.for_model(model_type, num_hidden_layers=1, vocab_size=64, **config)
        return resolve_targets(AutoModelForCausalLM.from_config(cfg), "auto")

    small = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2}
    llama = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    assert targets("llama", **small) == llama
    assert targets("qwen2", **small) == llama
    neox = ["dense", "dense_4h_to_h", "dense_h_to_4h", "query_key_value"]
    assert targets("gpt_neox", **small) == neox
    gpt2 = targets("gpt2", n_embd=32, n_head=2, n_layer=1)
    assert gpt2 == ["c_attn", "c_fc", "c_proj"]
