"""A bitwise replay passes only what it compared.

The replay level re-trains a commit's document; getting the recorded weights back is not
a pass by itself: the manifest's other claims (settings, results, token stream) must be
what the replay recorded too, a manifest the replay cannot read compares nothing, and a
base known to differ from the recorded one is not replayed on. These run `dlm-git
verify` in the test's process (`Forge.verify_here`: the replay trains the tiny document).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.tensorfiles import nudge, patch_tensor, tensor_names
from tests.support.verdicts import assert_caught, assert_verified
from tests.support.verified import DOC

pytestmark = pytest.mark.slow


def _learning_rate(manifest: dict[str, Any]) -> None:
    from dlm_git.hashing import canonical_json_sha256

    manifest["training_config"]["learning_rate"] = 0.5
    manifest["config_sha256"] = canonical_json_sha256(manifest["training_config"])


def _final_loss(manifest: dict[str, Any]) -> None:
    manifest["training"]["final_loss_hex"] = "0x1.0000000000000p-10"


def _token_root(manifest: dict[str, Any]) -> None:
    manifest["tokens"]["root"] = "1" * 64


def test_claims_the_replay_does_not_reproduce_are_caught(forge: Any) -> None:
    """One claim of each kind changed (the settings trained with, their digest re-bound;
    the training's result; the token stream it read), the records re-bound around them:
    the hash level passes it, and the replay, which gets the recorded weights back, names
    each claim that is not what it recorded (it passed BITWISE). One replay for the three:
    each field is caught on its own in tests/unit/test_replay_claims.py."""
    manifest = forge.manifest()
    for forge_claim in (_learning_rate, _final_loss, _token_root):
        forge_claim(manifest)
    forge.write_manifest(manifest)
    forge.commit("manifest claims other settings, results and tokens")

    assert_verified(forge.verify("HEAD"))
    replay = forge.verify_here("HEAD", "--level", "replay")
    assert_caught(replay, "replay", verdicts=("MISMATCH",))
    detail = replay.first_failure["detail"]
    assert "weights identical" in detail, replay.explain()
    for field in ("training_config.learning_rate", "training.final_loss_hex", "tokens.root"):
        assert f"{field} (recorded" in detail, replay.explain()


def _deep_training_config(forge: Any) -> None:
    """A manifest the replay's schema refuses (training_config nested past
    `validated.MAX_ANY_DEPTH`), beside a re-bound adapter_config.json that the replay
    would otherwise find differs (rsLoRA flipped)."""
    from dlm_git.hashing import canonical_json_sha256

    files = forge.adapter_files()
    config = json.loads(files["adapter_config.json"])
    config["use_rslora"] = not config.get("use_rslora", False)
    files["adapter_config.json"] = json.dumps(config, indent=2).encode()
    forge.store_adapter(files, rebind="files")
    manifest = forge.manifest()
    deep: Any = "x"
    for _ in range(70):
        deep = [deep]
    manifest["training_config"]["note"] = deep
    manifest["config_sha256"] = canonical_json_sha256(manifest["training_config"])
    forge.rebind_eval(forge.write_canonical(f"{DOC}/manifest.json", manifest))
    forge.sync_dvc_lock_files()


def _no_manifest(forge: Any) -> None:
    forge.git("rm", "-qf", f"{DOC}/manifest.json")


@pytest.mark.parametrize("unreadable", [_deep_training_config, _no_manifest], ids=["deep", "gone"])
def test_a_manifest_the_replay_cannot_read_compares_nothing(forge: Any, unreadable: Any) -> None:
    """The commit's manifest does not read as a manifest (too deep for the schema, or
    not there): whatever the hash level makes of it, the replay compared nothing but
    the weights with it, so its `replay` check is ABSENT, never a pass (it was BITWISE
    with the config edited, or passed) and never an accusation (it was MISMATCH
    against a weights digest nothing recorded)."""
    unreadable(forge)
    forge.git("rm", "-qf", "--ignore-unmatch", f"{DOC}/eval.json", f"{DOC}/eval_metrics.json")
    forge.commit("a manifest the replay cannot read")

    replay = forge.verify_here("HEAD", "--level", "replay")
    why = replay.explain()
    assert replay.code != 0 and replay.verdict in ("FAILED", "CANNOT_VERIFY"), why
    check = replay.check("replay")
    assert check["state"] == "absent" and "compare" in check["detail"], why


def test_a_base_known_to_differ_is_not_replayed(forge: Any) -> None:
    """An honest commit, the auditor's tiny base changed (one q_proj weight nudged): the
    hash level's `base.identity` fails, and the replay does not train on that base to
    report a "bit equality expected" MISMATCH about the commit (it did): its check is
    ABSENT and the verdict stays the hash level's FAILED."""
    from dlm_git.base.tiny import tiny_dir

    weights = next(Path(tiny_dir()).glob("*.safetensors"))
    blob, mode = weights.read_bytes(), weights.stat().st_mode
    name = next(n for n in tensor_names(blob) if "q_proj" in n)
    weights.chmod(0o644)
    weights.write_bytes(patch_tensor(blob, name, nudge))
    try:
        replay = forge.verify_here("HEAD", "--level", "replay")
    finally:
        weights.write_bytes(blob)
        weights.chmod(mode)
    why = replay.explain()
    assert replay.code == 1 and replay.verdict == "FAILED", why
    assert replay.check("base.identity")["state"] == "failed", why
    check = replay.check("replay")
    assert check["state"] == "absent" and "not replayed" in check["detail"], why
    assert "bit equality expected" not in why, why
