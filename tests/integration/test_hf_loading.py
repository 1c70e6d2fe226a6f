"""Hugging Face tools load what dlm-git trains, and records from before the card still verify.

Specification:
- A Hub base, spelled `hf:<repo>@<rev>` or as its registry key, gives one adapter: the
  same bytes in every file of `adapter/` (weights, `adapter_config.json`, `README.md`).
- `adapter_config.json` names the base by its Hub repo id and 40-hex revision, so peft's
  `AutoPeftModelForCausalLM.from_pretrained(adapter_dir)` loads it offline
  (`HF_HUB_OFFLINE=1`, `HF_HUB_CACHE` holding the base) and `generate()` runs.
- The card's metadata names the base for the Hub (`huggingface_hub.ModelCard`).
- A commit written before the card (adapter_config.json naming the document's base spec,
  revision null, no README.md) verifies VERIFIED at the hash level, and its replay is
  BITWISE with a note saying the record is the older form of the replayed files; an
  older-form record that is not exactly that form is a MISMATCH, as any other file.

The base's build, the trainings and the replays are the CLI in this process
(tests/support/verdicts.py); peft loads the adapter in a fresh interpreter of its own, as
a user's program would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.demo import write_demo
from tests.support.env import subprocess_env
from tests.support.forger import Forge
from tests.support.gitrepo import init_repo
from tests.support.hub import stand_in
from tests.support.older import older_form
from tests.support.verdicts import call_main_in, main_captured

pytestmark = pytest.mark.slow

REPO_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
QUICK = {"max_steps": "2", "sequence_len": "32", "micro_batch_size": "2"}
LOAD_AND_GENERATE = """
import sys, torch
from peft import AutoPeftModelForCausalLM
model = AutoPeftModelForCausalLM.from_pretrained(sys.argv[1])
out = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3, do_sample=False)
print(model.peft_config["default"].base_model_name_or_path, tuple(out.shape))
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A Hugging Face cache holding a 2-layer SmolLM2-135M-shaped build under the registry
    key's repo, answering to the key's pinned revision too (`tests/support/hub.py`)."""
    root = tmp_path_factory.mktemp("hub")
    args = ("smollm2-135m", "--repo-id", REPO_ID, "--layers", "2", "--hf-cache", str(root))
    built = main_captured(root, ["base", "build", *args])
    assert built.code == 0, built.stderr
    return root, stand_in(root, "smollm2-135m")


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_both_spellings_of_a_hub_base_give_one_adapter_that_peft_loads_offline(
    tmp_path: Path,
    hub: tuple[Path, str],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache, pin = hub
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    for variable, value in env.items():  # dlm-git reads them when it resolves the base
        monkeypatch.setenv(variable, value)
    adapters = {}
    for name, spec in (("key", "smollm2-135m"), ("pinned", f"hf:{REPO_ID}@{pin}")):
        repo = init_repo(tmp_path / name)  # one repository each: the documents share an id
        write_demo(repo / name, name=f"{name}.dlm", base_model=spec, **QUICK)
        train = ["train", str(repo / name), "-q", "--device", "cpu", "--threads", "2"]
        result = call_main_in(repo, capfd)(train)
        assert result.code == 0, result.stderr
        adapters[name] = repo / name / "adapter"
    key, pinned = files_of(adapters["key"]), files_of(adapters["pinned"])
    assert sorted(key) == ["README.md", "adapter_config.json", "adapter_model.safetensors"]
    assert key == pinned  # every byte: weights, config and card

    config = json.loads(key["adapter_config.json"])
    assert (config["base_model_name_or_path"], config["revision"]) == (REPO_ID, pin)
    card = key["README.md"].decode("utf-8")
    assert "smollm2-135m" not in card and f"hf:{REPO_ID}" not in card
    assert str(tmp_path) not in card and str(cache) not in card

    from huggingface_hub import ModelCard

    meta = ModelCard.load(adapters["key"] / "README.md").data
    assert meta.base_model == REPO_ID and meta.library_name == "peft"
    assert {"dlm-git", "lora"} <= set(meta.tags)

    for adapter in adapters.values():  # peft alone, offline, from the adapter directory
        proc = subprocess.run(
            [sys.executable, "-c", LOAD_AND_GENERATE, str(adapter)],
            env=subprocess_env(**env),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.split()[0] == REPO_ID and "(1, 6)" in proc.stdout, proc.stdout


# --------------------------------------------------------------------------- older records


def test_a_record_from_before_the_card_verifies_and_replays_bitwise(forge: Forge) -> None:
    older_form(forge)
    result = forge.verify("HEAD")
    assert result.verdict == "VERIFIED", result.explain()
    assert "2 files" in result.check("adapter.files")["detail"]

    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.verdict == "BITWISE", result.explain()
    assert result.check("replay")["ok"]
    assert any("before the model card" in n for n in result.doc["notes"]), result.doc


def test_an_older_form_record_with_another_config_is_a_mismatch(forge: Forge) -> None:
    from dlm_git.hashing import canonical_json
    from dlm_git.train.adapter import legacy_adapter_config

    current = json.loads(forge.adapter_files()["adapter_config.json"])
    older = json.loads(legacy_adapter_config(current, "builtin:tiny"))
    older["inference_mode"] = not older["inference_mode"]  # no hash-level check reads it
    older_form(forge, canonical_json(older))
    assert forge.verify("HEAD").verdict == "VERIFIED"

    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.verdict == "MISMATCH", result.explain()
    assert "adapter_config.json" in result.check("replay")["detail"]


# --------------------------------------------------------------------------- the card is checked


def test_the_card_is_bound_like_every_adapter_file(forge: Forge) -> None:
    files = forge.adapter_files()
    # the card removed, the manifest not re-bound: the recorded file is missing
    forge.store_adapter({n: d for n, d in files.items() if n != "README.md"})
    forge.commit("card removed")
    result = forge.verify("HEAD")
    assert result.verdict == "FAILED" and result.first_failure is not None, result.explain()
    assert result.first_failure["name"] == "adapter.files"
    assert "missing: ['README.md']" in result.first_failure["detail"]
    # an unknown file beside the card is refused as before
    forge.store_adapter({**files, "notes.txt": b"extra\n"})
    forge.commit("extra file")
    result = forge.verify("HEAD")
    assert result.first_failure is not None and result.first_failure["name"] == "adapter.files"
    assert "extra: ['notes.txt']" in result.first_failure["detail"], result.explain()


def test_an_edited_card_rebound_in_the_manifest_is_caught_by_replay(forge: Forge) -> None:
    files = forge.adapter_files()
    card = files["README.md"].replace(b"dlm-git verify", b"trust me, no need to verify")
    forge.store_adapter({**files, "README.md": card}, rebind="files")
    forge.commit("rebound card")
    assert forge.verify("HEAD").verdict == "VERIFIED"
    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.verdict == "MISMATCH", result.explain()
    assert "README.md differ" in result.check("replay")["detail"]
