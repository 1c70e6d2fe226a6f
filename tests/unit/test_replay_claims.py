"""Which manifest claims a bitwise replay compares (`dlm_git.verify.replay_claims`), on
the demo's committed manifest: every field a replay reproduces is named when it differs;
the fields a replay may record otherwise never are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlm_git.manifest.records import read_manifest_bytes
from dlm_git.manifest.schema import Manifest
from dlm_git.verify.replay_claims import describe, differing_claims

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo" / "manifest.json"


def _demo() -> Manifest:
    return read_manifest_bytes(DEMO.read_bytes(), "manifest.json")


def _with(path: str, value: Any, manifest: Manifest | None = None) -> Manifest:
    """The manifest with the field at dotted `path` set to `value`."""
    data = (manifest or _demo()).model_dump(mode="json")
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return Manifest.model_validate(data)


def test_the_same_record_differs_in_nothing() -> None:
    assert differing_claims(_demo(), _demo(), base_compared=True) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("section_ids", ["eab90619d75918f3"]),
        ("tokens.root", "2" * 64),
        ("tokens.tokens", 9_000_000),
        ("training_config.learning_rate", 0.5),
        ("training_config.optimizer.eps", 1e-6),
        ("config_sha256", "3" * 64),
        ("training.steps", 4000),
        ("training.final_loss_hex", "0x1.0000000000000p-10"),
        ("adapter.tensor_root", "4" * 64),
        ("base.spec", "hf:someone/else"),
        ("base.kind", "hf"),
    ],
)
def test_a_claim_a_bitwise_replay_reproduces_is_named(path: str, value: Any) -> None:
    """Compared wherever the base was or was not compared: a pure function of the
    document, its inputs and the training."""
    for base_compared in (True, False):
        found = differing_claims(_with(path, value), _demo(), base_compared)
        assert [c.split(" (")[0] for c in found] == [path], found


def test_a_reordered_tensor_list_is_named() -> None:
    tensors = _demo().model_dump(mode="json")["adapter"]["tensors"]
    found = differing_claims(_with("adapter.tensors", tensors[::-1]), _demo(), True)
    assert [c.split(" (")[0] for c in found] == ["adapter.tensors"], found


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("dlm_sha256", "0" * 64),
        ("sources.merkle_root", "1" * 64),
        ("lock_sha256", "5" * 64),
        ("base.revision", "another-revision"),
        ("segments", None),
        ("segments.every", 3),
        ("adapter.files", {}),
    ],
)
def test_what_a_replay_may_record_otherwise_is_never_named(path: str, value: Any) -> None:
    """The document's and its sources' digests (the hash level compares them with the
    commit's own bytes, and accepts an older record's raw-bytes digests of a CRLF
    checkout, which a replay never writes), the replay's own lock, the base snapshot its
    cache resolved, its snapshot interval and the adapter files (judged by the replay's
    other-files rule)."""
    assert differing_claims(_with(path, value), _demo(), base_compared=True) == []


@pytest.mark.parametrize(
    "path", ["tokenizer_sha256", "base.tensor_root", "base.tokenizer_sha256", "base.config_sha256"]
)
def test_the_base_digests_are_compared_only_where_the_base_was(path: str) -> None:
    recorded = _with(path, "6" * 64)
    assert [c.split(" (")[0] for c in differing_claims(recorded, _demo(), True)] == [path]
    assert differing_claims(recorded, _demo(), base_compared=False) == []


def test_an_older_record_without_the_base_config_digest_is_its_form() -> None:
    """Manifests written before dlm-git recorded the base's config.json have it null."""
    older = _with("base.config_sha256", None)
    assert differing_claims(older, _demo(), base_compared=True) == []


def test_a_setting_one_side_lacks_is_named() -> None:
    data = _demo().model_dump(mode="json")
    del data["training_config"]["seed"]
    found = differing_claims(Manifest.model_validate(data), _demo(), base_compared=True)
    assert found == ["training_config.seed (recorded nothing, replayed 42)"], found


def test_a_detail_names_the_first_few_and_counts_the_rest() -> None:
    recorded = _demo()
    for path in ("training.steps", "tokens.tokens", "tokens.rows", "tokens.sequences", "dlm_id"):
        recorded = _with(path, 1, recorded) if path != "dlm_id" else _with(path, "x", recorded)
    detail = describe(differing_claims(recorded, _demo(), base_compared=True))
    assert detail.startswith("weights identical but"), detail
    assert detail.endswith("; and 1 more"), detail
    assert "dlm_id (recorded 'x', replayed '01M800GRBP0GEV3WAMXAHDD42B')" in detail, detail
