"""The adapter's model card (`dlm_git/train/card.py`) and its config's base fields.

Specification:
- The Hub's own card parser (`huggingface_hub`) reads the card's metadata: `base_model`
  (the Hub repo id, only for a Hub base), `library_name: peft`, tags `dlm-git` and `lora`.
- The card is a pure function of its facts: the same bytes twice, no absolute path, and a
  system prompt holding a code fence cannot end the settings block early.
- `adapter_config.json` names a Hub base by repo id and revision, any other base by null;
  `legacy_adapter_config` gives back exactly the bytes dlm-git wrote before.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import ModelCard
from huggingface_hub.repocard import metadata_load

from dlm_git.hashing import canonical_json, canonical_json_sha256
from dlm_git.train.adapter import HubBase, canonical_adapter_config, legacy_adapter_config
from dlm_git.train.card import CardFacts, render_card

REV = "12fd25f77366fa6b3b4b768ec3050bf629380bac"
HUB = HubBase("HuggingFaceTB/SmolLM2-135M-Instruct", REV)
CONFIG = {"lora_r": 8, "seed": 42, "system_prompt": "Answer ```briefly```.\n---\nok"}
WEIGHTS = "ab" * 32


def facts(hub: HubBase = HUB, kind: str = "hf") -> CardFacts:
    return CardFacts(
        hub=hub,
        base_kind=kind,
        base_tensor_root="11" * 32,
        tokenizer_sha256="22" * 32,
        tokens_root="33" * 32,
        sources_root="44" * 32,
        versions={"peft": "0.21.2", "torch": "2.13.0+cpu"},
        numerics="x86-64-v3",
        hardware_tier="cpu",
        determinism_class="strong",
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "README.md"
    path.write_text(text, "utf-8")
    return path


def test_the_hub_parser_reads_the_metadata_of_a_hub_base_card(tmp_path: Path) -> None:
    path = write(tmp_path, render_card(facts(), CONFIG, WEIGHTS))
    meta = metadata_load(path)
    assert meta is not None
    assert meta["base_model"] == HUB.repo_id
    assert meta["library_name"] == "peft"
    assert {"dlm-git", "lora"} <= set(meta["tags"])
    card = ModelCard.load(path)
    assert card.data.base_model == HUB.repo_id and card.data.library_name == "peft"
    assert "AutoPeftModelForCausalLM" in card.text and REV in card.text
    assert WEIGHTS in card.text and canonical_json_sha256(CONFIG) in card.text
    assert "dlm-git verify <commit> --doc" in card.text


def test_a_base_not_on_the_hub_has_no_base_model_and_says_how_to_load(tmp_path: Path) -> None:
    for kind in ("builtin", "local"):
        path = write(tmp_path, render_card(facts(HubBase(), kind), CONFIG, WEIGHTS))
        meta = metadata_load(path)
        assert meta is not None and "base_model" not in meta
        assert meta["library_name"] == "peft" and "dlm-git" in meta["tags"]
        text = ModelCard.load(path).text
        assert "PeftModel.from_pretrained(base" in text
        assert ("builtin:tiny" in text) == (kind == "builtin")


def test_the_card_is_deterministic_and_its_settings_block_holds(tmp_path: Path) -> None:
    text = render_card(facts(), CONFIG, WEIGHTS)
    assert text == render_card(facts(), CONFIG, WEIGHTS)
    assert str(tmp_path) not in text and "/home" not in text and "/tmp" not in text
    # the settings block is fenced longer than any backtick run of the config
    settings = canonical_json(CONFIG).decode("utf-8")
    assert f"````json\n{settings}````\n" in text


def test_the_config_names_a_hub_base_by_id_and_revision_and_others_by_null() -> None:
    peft = {"r": 8, "target_modules": ["v_proj", "q_proj"], "revision": None}
    hub = canonical_adapter_config({**peft, "base_model_name_or_path": "/tmp/x"}, HUB)
    assert hub["base_model_name_or_path"] == HUB.repo_id and hub["revision"] == REV
    assert hub["target_modules"] == ["q_proj", "v_proj"]
    other = canonical_adapter_config(peft, HubBase())
    assert other["base_model_name_or_path"] is None and other["revision"] is None


def test_the_legacy_form_is_the_bytes_dlm_git_wrote_before() -> None:
    new = canonical_adapter_config({"r": 8, "revision": None, "target_modules": ["q"]}, HUB)
    older = legacy_adapter_config(new, "smollm2-135m")
    expected = {"r": 8, "revision": None, "target_modules": ["q"]}
    assert older == canonical_json({**expected, "base_model_name_or_path": "smollm2-135m"})
