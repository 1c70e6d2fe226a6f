"""The lock drift policy table (`dlm_git.lock.policy`) and lock parsing, on plain data."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from dlm_git.lock.decision import judge
from dlm_git.lock.errors import LockError
from dlm_git.lock.io import parse_lock, read_lock, write_lock
from dlm_git.lock.policy import Finding, classify
from dlm_git.lock.schema import Lock
from dlm_git.severity import Severity
from tests.support.records import lock_record

LOCK = lock_record()
RANKS_2 = {
    "world_size": 2,
    "backend": "gloo",
    "bucket_elements": 4194304,
    "sharding": "group-stride",
}


def lock(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(LOCK)
    for key, value in changes.items():
        out[key] = value
    return out


def versions(**changes: str | None) -> dict[str, str]:
    out = dict(LOCK["pinned_versions"])
    for name, value in changes.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


# --------------------------------------------------------------------------- classify


def test_identical_locks_have_no_findings() -> None:
    assert classify(LOCK, copy.deepcopy(LOCK)) == []


@pytest.mark.parametrize(
    ("field", "new", "severity"),
    [
        ("dlm_sha256", "00" * 32, "ALLOW"),
        ("base_model", "hf:org/other", "ERROR"),
        ("base_model_revision", "0" * 40, "ERROR"),
        ("base_model_revision", None, "ERROR"),
        ("base_model_sha256", "0" * 64, "ERROR"),
        ("dlm_id", "01M800GRBP0GEV3WAMXAHDD42C", "ERROR"),
        ("lock_version", 2, "ERROR"),
        ("hardware_tier", "cuda-sm80+", "WARN"),
        ("determinism_class", "best-effort", "WARN"),
        ("determinism_flags", {**LOCK["determinism_flags"], "threads": 8}, "WARN"),
        ("seed", 7, "WARN"),
        ("cuda_version", "12.4", "WARN"),
        ("rocm_version", "6.1", "WARN"),
        (
            "license_acceptance",
            {"accepted": True, "license": "llama3", "requires_acceptance": True},
            "WARN",
        ),
    ],
)
def test_field_severity(field: str, new: Any, severity: str) -> None:
    findings = classify(LOCK, lock(**{field: new}))
    if isinstance(new, dict):
        assert findings and all(f.severity == severity for f in findings)
        changed = sorted(k for k in set(new) | set(LOCK[field]) if new.get(k) != LOCK[field].get(k))
        assert sorted(f.field for f in findings) == [f"{field}.{k}" for k in changed]
    finding = findings[0] if isinstance(new, dict) else only(findings)
    assert finding.severity == severity
    assert field in finding.describe()
    if isinstance(new, dict):
        # mapping fields are reported per changed key, so the message names what moved
        assert finding.field.startswith(field + ".")
        sub = finding.field.split(".", 1)[1]
        assert finding.old == LOCK[field].get(sub)
        assert finding.new == new.get(sub)
    else:
        assert finding.field == field
        assert finding.old == LOCK[field]
        assert finding.new == new


@pytest.mark.parametrize(
    "name", ["transformers", "peft", "safetensors", "tokenizers", "accelerate", "numpy", "dlm_git"]
)
def test_other_package_versions_warn(name: str) -> None:
    # both upgrades and major-version jumps are WARN for everything but torch
    for new in ("99.0.0", "0.0.1"):
        finding = only(classify(LOCK, lock(pinned_versions=versions(**{name: new}))))
        assert finding.field == f"pinned_versions.{name}"
        assert finding.severity == "WARN"
        assert (finding.old, finding.new) == (LOCK["pinned_versions"][name], new)


@pytest.mark.parametrize(
    ("old", "new", "severity"),
    [
        ("2.13.0", "3.0.0", "ERROR"),
        ("2.13.0", "1.13.0", "ERROR"),
        ("2.13.0+cpu", "3.0.0+cpu", "ERROR"),
        ("2.13.0", "2.14.1", "WARN"),
        ("2.13.0", "2.12.0", "WARN"),
        ("2.13.0", "2.13.1", "WARN"),
        ("2.13.0+cpu", "2.13.0+cu130", "WARN"),
        ("2.13.0", "2.13.0+cpu", "WARN"),
    ],
)
def test_torch_major_is_error_minor_patch_and_local_warn(old: str, new: str, severity: str) -> None:
    finding = only(
        classify(
            lock(pinned_versions=versions(torch=old)), lock(pinned_versions=versions(torch=new))
        )
    )
    assert finding.field == "pinned_versions.torch"
    assert finding.severity == severity


@pytest.mark.parametrize("direction", ["added", "removed"])
def test_added_or_removed_package_warns(direction: str) -> None:
    with_extra = lock(pinned_versions={**LOCK["pinned_versions"], "bitsandbytes": "0.45.0"})
    prior, current = (LOCK, with_extra) if direction == "added" else (with_extra, LOCK)
    finding = only(classify(prior, current))
    assert finding.field == "pinned_versions.bitsandbytes"
    assert finding.severity == "WARN"
    removed = lock(pinned_versions=versions(numpy=None))
    prior, current = (removed, LOCK) if direction == "added" else (LOCK, removed)
    finding = only(classify(prior, current))
    assert (finding.field, finding.severity) == ("pinned_versions.numpy", "WARN")


@pytest.mark.parametrize("side", ["prior", "current"])
def test_unknown_field_is_error(side: str) -> None:
    extra = {**LOCK, "hostname": "build-7"}
    prior, current = (extra, LOCK) if side == "prior" else (LOCK, extra)
    finding = only(classify(prior, current))
    assert (finding.field, finding.severity) == ("hostname", "ERROR")


def test_supersedes_is_not_compared() -> None:
    assert classify(LOCK, lock(supersedes="ab" * 32)) == []
    assert classify(lock(supersedes="ab" * 32), lock(supersedes="cd" * 32)) == []


def test_every_difference_is_reported_in_field_order() -> None:
    current = lock(
        base_model_sha256="0" * 64,
        seed=7,
        dlm_sha256="00" * 32,
        pinned_versions=versions(torch="3.0.0", numpy="1.26.4"),
    )
    findings = classify(LOCK, current)
    assert [(f.field, f.severity) for f in findings] == [
        ("base_model_sha256", "ERROR"),
        ("dlm_sha256", "ALLOW"),
        ("pinned_versions.numpy", "WARN"),
        ("pinned_versions.torch", "ERROR"),
        ("seed", "WARN"),
    ]


def test_describe_shows_old_and_new() -> None:
    finding = only(classify(LOCK, lock(seed=7)))
    assert finding.describe() == "seed changed: 42 -> 7"
    tier = only(classify(LOCK, lock(hardware_tier="x" * 200)))
    assert tier.describe().endswith("-> '" + "x" * 200 + "'")  # whole, never cut short
    hostile = only(classify(LOCK, lock(hardware_tier="y" * 10_000)))
    assert hostile.describe().endswith("'" + "y" * 200 + "' (and 9800 more characters)")


def test_a_world_size_change_is_described_in_full() -> None:
    """The WARN names every key of the distributed record that changed, never a dict cut
    off at "..." (issue 25)."""
    one = lock()
    two = lock(determinism_flags={**LOCK["determinism_flags"], "distributed": RANKS_2})
    four = copy.deepcopy(two)
    four["determinism_flags"]["distributed"]["world_size"] = 4
    assert only(classify(one, two)).describe() == (
        "determinism_flags.distributed changed: None -> {'world_size': 2, 'backend': 'gloo',"
        " 'bucket_elements': 4194304, 'sharding': 'group-stride'}"
    )
    assert only(classify(two, four)).describe() == (
        "determinism_flags.distributed.world_size changed: 2 -> 4"
    )


# --------------------------------------------------------------------------- strict mode


def test_strict_mode_is_one_rule_every_warn_an_error() -> None:
    """`Severity.strict`, the rule the drift decision and the hooks both apply."""
    assert [s.strict(True) for s in Severity] == [Severity.ERROR, Severity.ERROR, Severity.IGNORE]
    assert [s.strict(False) for s in Severity] == list(Severity)


def test_strict_judgment_refuses_warn_drift_too_and_allow_never() -> None:
    current = lock(
        dlm_sha256="00" * 32,
        seed=7,
        base_model_sha256="0" * 64,
        pinned_versions=versions(torch="2.14.1"),
    )
    before = {f.field: f.severity for f in classify(LOCK, current)}
    assert before == {
        "base_model_sha256": "ERROR",
        "dlm_sha256": "ALLOW",
        "pinned_versions.torch": "WARN",
        "seed": "WARN",
    }
    loose, strict = judge(LOCK, current), judge(LOCK, current, strict=True)
    assert [f.field for f in loose.errors] == ["base_model_sha256"]
    assert [f.field for f in loose.warnings] == ["pinned_versions.torch", "seed"]
    assert [f.field for f in strict.errors] == [
        "base_model_sha256",
        "pinned_versions.torch",
        "seed",
    ]
    assert strict.warnings == () and not strict.ok
    assert {f.field: f.severity for f in classify(LOCK, current)} == before
    only_warns = lock(seed=7)
    assert judge(LOCK, only_warns).ok and not judge(LOCK, only_warns, strict=True).ok


# --------------------------------------------------------------------------- parse_lock

SUBJECT = "docs/demo/dlm.lock"


def lock_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, sort_keys=True).encode("utf-8") + b"\n"


def test_parse_lock_round_trip() -> None:
    parsed = parse_lock(lock_bytes(LOCK), SUBJECT)
    assert parsed.model_dump(mode="json") == LOCK


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\x00\xffgarbage", "not valid JSON"),
        (b'{"lock_version": 1,', "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[1, 2, 3]\n", "not a JSON object"),
        (b'"dlm.lock"\n', "not a JSON object"),
        (lock_bytes({**LOCK, "lock_version": 2}), "lock_version 2"),
        (lock_bytes({**LOCK, "lock_version": 99}), "lock_version 99"),
        (lock_bytes({k: v for k, v in LOCK.items() if k != "lock_version"}), "lock_version"),
        (
            lock_bytes({k: v for k, v in LOCK.items() if k != "base_model_sha256"}),
            "base_model_sha256",
        ),
        (lock_bytes({**LOCK, "hostname": "build-7"}), "hostname"),
        (lock_bytes({**LOCK, "seed": "forty-two"}), "seed"),
        (lock_bytes({**LOCK, "determinism_class": "maybe"}), "determinism_class"),
    ],
)
def test_parse_lock_errors_name_the_file(data: bytes, needle: str) -> None:
    with pytest.raises(LockError) as info:
        parse_lock(data, SUBJECT)
    text = str(info.value)
    assert SUBJECT in text
    assert needle in text
    assert "\n" not in text
    assert info.value.exit_code == 1


def test_read_lock_missing_is_none_and_corrupt_raises(tmp_path: Any) -> None:
    path = tmp_path / "dlm.lock"
    assert read_lock(path) is None
    path.write_bytes(b"not json")
    with pytest.raises(LockError, match="dlm.lock"):
        read_lock(path)


# --------------------------------------------------------------------------- canonical bytes


def test_lock_bytes_are_canonical_and_hashed(tmp_path: Any) -> None:
    shuffled = dict(reversed(list(LOCK.items())))
    a = Lock.model_validate(shuffled)
    data = a.to_bytes()
    assert data.endswith(b"}\n") and not data.endswith(b"\n\n")
    obj = json.loads(data)
    assert list(obj) == sorted(obj)
    assert list(obj["pinned_versions"]) == sorted(obj["pinned_versions"])
    assert data == lock_bytes(LOCK)
    assert a.sha256() == hashlib.sha256(data).hexdigest()
    assert Lock.model_validate(LOCK).to_bytes() == data
    path = tmp_path / "dlm.lock"
    write_lock(path, a)
    assert path.read_bytes() == data
    assert parse_lock(path.read_bytes(), str(path)) == a


def test_supersedes_changes_the_bytes_and_hash() -> None:
    a = Lock.model_validate(LOCK)
    b = a.model_copy(update={"supersedes": a.sha256()})
    assert b.sha256() != a.sha256()
    assert json.loads(b.to_bytes())["supersedes"] == a.sha256()
    assert b.without_supersedes() == a
