"""`train` against a drifted `dlm.lock`, row by row of the policy table: an ERROR drift
aborts and keeps the outputs, a WARN drift warns, trains and rewrites the lock (or, in a
strict lock, aborts), and an ALLOW row (editing the document) trains.

Each test starts from a copy of a trained document (`trained_repo`), rewrites its lock
to simulate a lock recorded elsewhere, and runs `train` in-process.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.support.cli import RunCli, one_line
from tests.support.demo import DOC_NAME, Trained
from tests.support.files import snapshot
from tests.support.lockedits import (
    Drift,
    assert_untouched,
    drift,
    read_lock_json,
    set_field,
    torch_local_drift,
    torch_major_drift,
    torch_minor_drift,
)

pytestmark = pytest.mark.slow


ERROR_DRIFTS: list[tuple[str, Drift]] = [
    ("base_model", set_field("base_model", "hf:someorg/other-model@" + "a" * 40)),
    ("base_model_revision", set_field("base_model_revision", "tiny-0000000000000000")),
    ("base_model_sha256", set_field("base_model_sha256", "0" * 64)),
    ("pinned_versions.torch", torch_major_drift),
    ("dlm_id", set_field("dlm_id", "01M800GRBP0GEV3WAMXAHDD42C")),
]

WARN_DRIFTS: list[tuple[str, Drift]] = [
    ("pinned_versions.torch", torch_minor_drift),
    ("pinned_versions.torch", torch_local_drift),
    *(
        (f"pinned_versions.{name}", set_field(f"pinned_versions.{name}", "0.0.1"))
        for name in ("transformers", "peft", "safetensors", "tokenizers", "accelerate", "numpy")
    ),
    ("hardware_tier", set_field("hardware_tier", "cuda-sm80+")),
    ("determinism_class", set_field("determinism_class", "best-effort")),
    ("determinism_flags", set_field("determinism_flags.threads", 8)),
    ("seed", set_field("seed", 7)),
    ("cuda_version", set_field("cuda_version", "12.4")),
    ("rocm_version", set_field("rocm_version", "6.1")),
    (
        "license_acceptance",
        set_field(
            "license_acceptance",
            {"accepted": True, "license": "apache-2.0", "requires_acceptance": False},
        ),
    ),
]


def _ids(rows: list[tuple[str, Drift]]) -> list[str]:
    return [
        f"{field}-{edit.__name__}" if edit.__name__ != "edit" else field for field, edit in rows
    ]


# --------------------------------------------------------------------------- ERROR rows


@pytest.mark.parametrize(("field", "edit"), ERROR_DRIFTS, ids=_ids(ERROR_DRIFTS))
def test_error_drift_aborts_and_keeps_outputs(
    trained_repo: Path, train: RunCli, field: str, edit: Drift
) -> None:
    drift(trained_repo, edit)
    before = snapshot(trained_repo)
    code, out, err = train(trained_repo)
    assert code == 1
    line = one_line(err)
    assert "lock validation failed" in line
    assert f"{field} changed" in line
    assert "--update-lock" in line
    assert "dlm.lock" in line
    assert "trained" not in out
    assert_untouched(trained_repo, before)


def test_multiple_error_drifts_are_all_listed(trained_repo: Path, train: RunCli) -> None:
    drift(
        trained_repo,
        set_field("base_model_sha256", "0" * 64),
        set_field("base_model_revision", "tiny-0000000000000000"),
        torch_major_drift,
        set_field("seed", 7),  # a WARN alongside the ERRORs does not hide them
    )
    before = snapshot(trained_repo)
    code, _, err = train(trained_repo)
    assert code == 1
    line = one_line(err)
    assert "lock validation failed" in line
    for field in ("base_model_sha256", "base_model_revision", "pinned_versions.torch"):
        assert f"ERROR {field} changed" in line
    assert line.count("ERROR ") == 3
    assert "--update-lock" in line
    assert_untouched(trained_repo, before)


# --------------------------------------------------------------------------- WARN rows


@pytest.mark.parametrize(("field", "edit"), WARN_DRIFTS, ids=_ids(WARN_DRIFTS))
def test_warn_drift_warns_trains_and_rewrites_lock(
    trained_repo: Path, trained_once: Trained, train: RunCli, field: str, edit: Drift
) -> None:
    drifted = drift(trained_repo, edit)
    assert drifted != trained_once.files["dlm.lock"]
    code, out, err = train(trained_repo)
    assert code == 0, err
    warns = [ln for ln in err.splitlines() if "WARN" in ln]
    assert len(warns) == 1, err
    # mapping fields are reported per changed key (e.g. determinism_flags.threads)
    assert f"WARN {field}" in warns[0] and "changed" in warns[0]
    assert "dlm.lock" in warns[0]
    assert "lock validation failed" not in err
    assert "trained 3 steps" in out
    # the lock now records the current environment, i.e. what the original run recorded
    assert (trained_repo / "dlm.lock").read_bytes() == trained_once.files["dlm.lock"]
    assert snapshot(trained_repo) | {"run.json": b""} == trained_once.files | {"run.json": b""}


def test_several_warn_drifts_each_warn(trained_repo: Path, train: RunCli) -> None:
    drift(trained_repo, set_field("seed", 7), set_field("pinned_versions.numpy", "0.0.1"))
    code, _, err = train(trained_repo)
    assert code == 0, err
    assert "WARN seed changed: 7 -> 42" in err
    assert "WARN pinned_versions.numpy changed: '0.0.1' -> " in err


STRICT_DRIFTS = WARN_DRIFTS[:1] + WARN_DRIFTS[-5:-1]


@pytest.mark.parametrize(("field", "edit"), STRICT_DRIFTS, ids=_ids(STRICT_DRIFTS))
def test_strict_lock_turns_warn_into_error(
    trained_repo: Path, train: RunCli, field: str, edit: Drift
) -> None:
    drift(trained_repo, edit)
    before = snapshot(trained_repo)
    code, _, err = train(trained_repo, "--strict-lock")
    assert code == 1
    line = one_line(err)
    assert "lock validation failed" in line
    # mapping fields are reported per changed key (e.g. determinism_flags.threads)
    assert f"ERROR {field} changed" in line or f"ERROR {field}." in line
    assert "--update-lock" in line
    assert_untouched(trained_repo, before)


def test_strict_lock_without_drift_trains(
    trained_repo: Path, trained_once: Trained, train: RunCli
) -> None:
    code, _, err = train(trained_repo, "--strict-lock")
    assert code == 0, err
    assert "WARN" not in err
    assert (trained_repo / "dlm.lock").read_bytes() == trained_once.files["dlm.lock"]


# --------------------------------------------------------------------------- ALLOW row


def test_editing_the_document_is_allowed(
    trained_repo: Path, trained_once: Trained, train: RunCli
) -> None:
    doc = trained_repo / DOC_NAME
    text = doc.read_text("utf-8")
    marker = "The same document, the same sources and the same base model give the same bytes."
    assert marker in text
    doc.write_text(text.replace(marker, marker + " Editing the prose is normal."), "utf-8")
    new_sha = hashlib.sha256(doc.read_bytes()).hexdigest()

    code, _, err = train(trained_repo, "--strict-lock")  # ALLOW stays allowed under strict
    assert code == 0, err
    assert "WARN" not in err
    assert "dlm.lock" not in err
    lock = read_lock_json(trained_repo)
    old = json.loads(trained_once.files["dlm.lock"])
    assert lock["dlm_sha256"] == new_sha != old["dlm_sha256"]
    assert {k: v for k, v in lock.items() if k != "dlm_sha256"} == {
        k: v for k, v in old.items() if k != "dlm_sha256"
    }
    manifest = json.loads((trained_repo / "manifest.json").read_bytes())
    assert manifest["dlm_sha256"] == new_sha
    assert (
        manifest["lock_sha256"]
        == hashlib.sha256((trained_repo / "dlm.lock").read_bytes()).hexdigest()
    )
