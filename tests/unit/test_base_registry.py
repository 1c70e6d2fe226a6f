"""The base keys real DLM documents name: each maps to its Hub repo and a pinned revision.

Specification:
- Every key the original `dlm` tool's registry knows (its `src/dlm/base_models/registry.py`
  at 1c83a65) is known here: a text base maps to the same Hub repo id and the same 40-hex
  revision; a vision- or audio-language base is refused in one line that says so.
- A value that names no base is one line whose hint names the `hf:<org>/<name>@<40-hex
  revision>` form and the shapes `dlm-git base build` makes offline.
- `dlm-git base build` knows the shape of `qwen2.5-coder-1.5b`, the base most real DLM
  documents name: Qwen2, 28 layers, hidden 1536, 1.54B parameters, tied embeddings.
- The hash level looks a registry key's base up at the revision its record names (an
  older dlm-git recorded the cache's `refs/main`), a 40-hex name only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.base.errors import BaseModelError
from dlm_git.base.families import FAMILIES
from dlm_git.base.registry import NOT_TEXT, REGISTRY
from dlm_git.base.spec import parse_base_spec
from dlm_git.verify.locate import locate_base_dir

# The original tool's registry (tenseleyFlow/DocumentLanguageModel, 1c83a65): key, repo, pin.
ORIGINAL_TEXT_KEYS = {
    "qwen2.5-0.5b": ("Qwen/Qwen2.5-0.5B-Instruct", "7ae557604adf67be50417f59c2c2f167def9a775"),
    "qwen2.5-1.5b": ("Qwen/Qwen2.5-1.5B-Instruct", "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"),
    "qwen2.5-3b": ("Qwen/Qwen2.5-3B-Instruct", "aa8e72537993ba99e69dfaafa59ed015b17504d1"),
    "qwen2.5-coder-1.5b": (
        "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        "2e1fd397ee46e1388853d2af2c993145b0f1098a",
    ),
    "qwen3-1.7b": ("Qwen/Qwen3-1.7B", "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e"),
    "qwen3-1.7b-thinking": ("Qwen/Qwen3-1.7B", "70d244cc86ccca08cf5af4e1e306ecf908b1ad5e"),
    "qwen3-4b": ("Qwen/Qwen3-4B", "1cfa9a7208912126459214e8b04321603b3df60c"),
    "qwen3-8b": ("Qwen/Qwen3-8B", "b968826d9c46dd6066d109eabc6255188de91218"),
    "llama-3.2-1b": (
        "meta-llama/Llama-3.2-1B-Instruct",
        "9213176726f574b556790deb65791e0c5aa438b6",
    ),
    "llama-3.2-3b": (
        "meta-llama/Llama-3.2-3B-Instruct",
        "0cb88a4f764b7a12671c53f0838cd831a0843b95",
    ),
    "llama-3.3-8b-instruct": (
        "allura-forge/Llama-3.3-8B-Instruct",
        "df95224cf87c32d9f4958dd284a07ded620aa4fc",
    ),
    "smollm3-3b": ("HuggingFaceTB/SmolLM3-3B", "a07cc9a04f16550a088caea529712d1d335b0ac1"),
    "olmo-2-7b-instruct": (
        "allenai/OLMo-2-1124-7B-Instruct",
        "470b1fba1ae01581f270116362ee4aa1b97f4c84",
    ),
    "gemma-2-2b-it": ("google/gemma-2-2b-it", "299a8560bedf22ed1c72a8a11e7dce4a7f9f51f8"),
    "gemma-2-9b-it": ("google/gemma-2-9b-it", "11c9b309abf73637e4b6f9a3fa1e92e615547819"),
    "smollm2-135m": (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "12fd25f77366fa6b3b4b768ec3050bf629380bac",
    ),
    "smollm2-360m": (
        "HuggingFaceTB/SmolLM2-360M-Instruct",
        "a10cc1512eabd3dde888204e902eca88bddb4951",
    ),
    "smollm2-1.7b": (
        "HuggingFaceTB/SmolLM2-1.7B-Instruct",
        "31b70e2e869a7173562077fd711b654946d38674",
    ),
    "phi-3.5-mini": ("microsoft/Phi-3.5-mini-instruct", "2fe192450127e6a83f7441aef6e3ca586c338b77"),
    "phi-4-mini-reasoning": (
        "microsoft/Phi-4-mini-reasoning",
        "0e3b1e2d02ee478a3743abe3f629e9c0cb722e0a",
    ),
    "mixtral-8x7b-instruct": (
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "eba92302a2861cdc0098cc54bc9f17cb2c47eb61",
    ),
}
ORIGINAL_OTHER_KEYS = {
    "mistral-small-3.1-24b-instruct": "vision-language",
    "paligemma-3b-mix-224": "vision-language",
    "qwen2-vl-2b-instruct": "vision-language",
    "internvl2-2b": "vision-language",
    "internvl3-2b": "vision-language",
    "qwen2-audio-7b-instruct": "audio-language",
}
REAL_DOCUMENT_KEYS = ("qwen2.5-coder-1.5b", "qwen2.5-1.5b", "smollm2-135m", "smollm2-360m")


@pytest.mark.parametrize("key", sorted(ORIGINAL_TEXT_KEYS))
def test_each_original_text_key_names_its_repo_at_the_original_pin(key: str) -> None:
    spec = parse_base_spec(key)
    assert (spec.kind, spec.registry_key) == ("hf", key)
    assert (spec.name, spec.revision) == ORIGINAL_TEXT_KEYS[key]


def test_the_registry_is_the_original_tools_and_no_more() -> None:
    assert set(REGISTRY) == set(ORIGINAL_TEXT_KEYS)
    assert set(NOT_TEXT) == set(ORIGINAL_OTHER_KEYS)
    assert set(REAL_DOCUMENT_KEYS) <= set(REGISTRY)


@pytest.mark.parametrize("key", sorted(ORIGINAL_OTHER_KEYS))
def test_an_original_vision_or_audio_key_is_refused_saying_why(key: str) -> None:
    with pytest.raises(BaseModelError) as info:
        parse_base_spec(key, "doc.dlm:3:13")
    line = str(info.value)
    assert line.startswith(f"doc.dlm:3:13: '{key}' names a {ORIGINAL_OTHER_KEYS[key]}")
    assert "text-only" in line and "\n" not in line


@pytest.mark.parametrize("value", ["llama-7b", "SmolLM2-135M", "qwen2.5-coder-7b"])
def test_an_unknown_key_hint_names_the_hf_form_and_the_buildable_shapes(value: str) -> None:
    with pytest.raises(BaseModelError) as info:
        parse_base_spec(value)
    hint = info.value.hint
    assert hint is not None and "\n" not in str(info.value)
    assert "hf:<org>/<name>@<40-hex revision>" in hint
    assert "dlm-git base build NAME" in hint
    for family in ("qwen2.5-coder-1.5b", "smollm2-135m", "qwen2.5-0.5b", "pythia-70m"):
        assert family in hint
    for key in REAL_DOCUMENT_KEYS:
        assert key in hint


def test_the_qwen25_coder_15b_shape_is_the_published_one() -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    family = FAMILIES["qwen2.5-coder-1.5b"]
    assert (family.model_type, family.source) == ("qwen2", "Qwen/Qwen2.5-Coder-1.5B-Instruct")
    config = AutoConfig.for_model(family.model_type, **family.config)
    with torch.device("meta"):  # the shape only: no memory, no random draw
        model = AutoModelForCausalLM.from_config(config)
    assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (
        28,
        1536,
        8960,
    )
    assert (config.num_attention_heads, config.num_key_value_heads) == (12, 2)
    assert config.vocab_size == 151936 and config.tie_word_embeddings is True
    assert model.lm_head.weight is model.model.embed_tokens.weight
    total = sum(p.numel() for p in model.parameters())
    embedding = model.model.embed_tokens.weight.numel()
    assert (total, total - embedding) == (1_543_714_304, 1_310_340_608)  # "1.54B", "1.31B"
    attention = model.model.layers[0].self_attn
    assert attention.q_proj.bias is not None and attention.o_proj.bias is None


# --------------------------------------------- the hash level: the record names the snapshot

REV = "0123456789abcdef0123456789abcdef01234567"
PIN = ORIGINAL_TEXT_KEYS["smollm2-135m"][1]


def _snapshot(hub: Path, revision: str) -> Path:
    snap = hub / "models--HuggingFaceTB--SmolLM2-135M-Instruct" / "snapshots" / revision
    snap.mkdir(parents=True)
    return snap


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_the_hash_level_finds_a_registry_base_at_its_recorded_revision(
    hub: Path, tmp_path: Path
) -> None:
    pinned, older = _snapshot(hub, PIN), _snapshot(hub, REV)

    def located(revision: str | None) -> Path | None:
        return locate_base_dir("smollm2-135m", tmp_path, tmp_path, None, revision=revision)

    assert located(PIN) == pinned
    assert located(None) == pinned
    # a commit an older dlm-git trained on the cache's refs/main then: that snapshot
    assert located(REV) == older
    older.rmdir()
    assert located(REV) is None  # not here: the base check is absent, never the pin's
    # a recorded revision is a name, never a path
    (hub / "escape").mkdir()
    assert located("../../escape") is None
    assert located("../" + PIN) is None


@pytest.mark.parametrize("recorded", [REV, "../x"])
def test_a_replay_of_a_key_recorded_at_another_revision_cannot_verify(recorded: str) -> None:
    """A replay resolves the key to its pin: retraining an older record on another
    snapshot would compare two bases' adapters, so it says why it cannot, and trains not."""
    from dlm_git.contract.outcome import Outcome
    from dlm_git.verify.profile import Setup, recorded_setup
    from dlm_git.verify.report import Verdict

    flags = {"threads": 1, "numerics": "native"}
    lock = {"determinism_flags": flags, "base_model": "smollm2-135m"}
    at_pin = recorded_setup({**lock, "base_model_revision": PIN}, Path("."), "d")
    assert isinstance(at_pin, Setup)
    check, verdict = recorded_setup({**lock, "base_model_revision": recorded}, Path("."), "d")
    assert verdict is Verdict.CANNOT_VERIFY and check.state is Outcome.ABSENT
    shown = recorded if recorded == REV else "another"
    assert f"records smollm2-135m at revision {shown}, not its pinned {PIN}" in check.detail
