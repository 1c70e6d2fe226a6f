"""Replay and segment levels: what the hash level cannot catch, re-training does.

These run `dlm-git verify` in the test's process (`Forge.verify_here`: the replay trains
the tiny document here, without a fresh process's imports).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.tensorfiles import flip_ulp, pick_tensor
from tests.support.verdicts import assert_caught, assert_verified
from tests.support.verified import SEGMENTS_OUT, WEIGHTS

pytestmark = pytest.mark.slow


def test_clean_replay_is_bitwise(forge: Any) -> None:
    result = forge.verify_here("HEAD", "--level", "replay")
    why = result.explain()
    assert result.code == 0, why
    assert result.verdict == "BITWISE", why
    assert result.doc["level"] == "replay"
    assert result.check("replay")["ok"] and result.check("replay.versions")["ok"], why


def test_consistent_forgery_passes_hash_but_not_replay(forge: Any) -> None:
    """One weight moved by one ulp; DVC objects, dvc.lock and the manifest's adapter
    record (file sha256, tensor digests, tensor root) all recomputed to match. The hash
    level cannot tell; the replay re-trains and finds different bits."""
    files = forge.adapter_files()
    tampered = flip_ulp(files[WEIGHTS])
    target = pick_tensor(files[WEIGHTS])
    forge.store_adapter({**files, WEIGHTS: tampered}, rebind="all")
    forge.commit("consistent forgery")

    hash_level = forge.verify("HEAD")
    assert_verified(hash_level)

    replay = forge.verify_here("HEAD", "--level", "replay")
    assert_caught(replay, "replay", verdicts=("MISMATCH",))
    detail = replay.first_failure["detail"]
    assert target in detail, replay.explain()
    assert "bit equality expected" in detail, replay.explain()


def test_clean_segments_are_bitwise(forge: Any) -> None:
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "2", "--seed", "0")
    why = result.explain()
    assert result.code == 0, why
    assert result.verdict == "SEGMENTS_BITWISE", why
    assert result.check("segments.chain")["ok"], why
    replayed = [c for c in result.checks if c["name"] == "segments.replay"]
    assert len(replayed) == 2 and all(c["ok"] for c in replayed), why


@pytest.mark.parametrize(
    ("rechain", "check", "verdict", "detail"),
    [
        (False, "segments.chain", "FAILED", "does not match its recorded sha256"),
        (True, "segments.replay", "MISMATCH", "diverges"),
    ],
    ids=["unchained", "rechained"],
)
def test_forged_segment_boundary(
    forge: Any, rechain: bool, check: str, verdict: str, detail: str
) -> None:
    """A middle boundary's snapshot changed (one LoRA parameter moved). Unchained: its
    recorded tensors hash no longer matches, and the chain check catches it. Rechained:
    its hash, every later `prev` and the manifest's chain root are recomputed, so only
    replaying a segment can catch it; all segments are sampled."""
    count = forge.manifest()["segments"]["count"]
    assert count >= 3, "need a middle boundary"
    forge.forge_boundary(count // 2, rechain=rechain)
    forge.commit(f"forged boundary ({'rechained' if rechain else 'unchained'})")
    result = forge.verify_here(
        "HEAD", "--level", "segments", "--sample", str(count - 1), "--seed", "0"
    )
    assert_caught(result, check, verdicts=(verdict,))
    assert detail in result.first_failure["detail"], result.explain()
    if rechain:
        assert result.check("segments.chain")["ok"], result.explain()


def test_a_rebound_adapter_config_is_caught_by_replay(forge: Any) -> None:
    """`adapter_config.json` changed (rsLoRA scaling and an alpha pattern: the loaded
    model's outputs change) with the manifest's file record, the `.dir` listing and
    dvc.lock re-bound. The weights replay bit for bit; the config does not."""
    import json

    files = forge.adapter_files()
    config = json.loads(files["adapter_config.json"])
    config["use_rslora"] = True
    config["alpha_pattern"] = {"q_proj": 64}
    forged = json.dumps(config, indent=2, sort_keys=True).encode("utf-8") + b"\n"
    forge.store_adapter({**files, "adapter_config.json": forged}, rebind="files")
    forge.commit("rebound adapter config")

    assert_verified(forge.verify("HEAD"))
    replay = forge.verify_here("HEAD", "--level", "replay")
    assert_caught(replay, "replay", verdicts=("MISMATCH",))
    assert "adapter_config.json differ" in replay.first_failure["detail"], replay.explain()


@pytest.mark.parametrize("kept", [0, 1])
def test_a_chain_cut_to_fewer_than_two_boundaries_is_caught(forge: Any, kept: int) -> None:
    """Every boundary but the last (`kept` 1: it is made to link to the genesis digest
    and is the adapter's own) or none (`kept` 0) left in the segments out, the manifest's
    count and chain root re-recorded to match: no segment is left to replay, and the
    chain check fails it in one line (it had passed with nothing replayed, or raised)."""
    from dlm_git.hashing import canonical_json, sha256_bytes
    from dlm_git.train.segments import genesis

    manifest = forge.manifest()
    root = genesis(
        manifest["config_sha256"], manifest["tokens"]["root"], manifest["base"]["tensor_root"]
    )
    files = forge.dir_files(SEGMENTS_OUT)
    last = max(n for n in files if n.endswith(".json"))
    kept_files: dict[str, bytes] = {}
    if kept:
        meta = {**json.loads(files[last]), "prev": root}
        kept_files = {
            last: canonical_json(meta),
            last[:-5] + ".safetensors": files[last[:-5] + ".safetensors"],
        }
        root = sha256_bytes(kept_files[last])
    forge.store_out(SEGMENTS_OUT, kept_files)
    manifest["segments"] = {**manifest["segments"], "count": kept, "chain_root": root}
    forge.write_manifest(manifest)
    forge.commit(f"segment chain cut to {kept} boundaries")
    result = forge.verify_here("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert_caught(result, "segments.chain", verdicts=("FAILED",))
    assert "no segment" in result.first_failure["detail"], result.explain()
