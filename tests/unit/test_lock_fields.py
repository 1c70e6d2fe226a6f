"""A lock holds only what a dlm-git writes (`dlm_git.lock.fields`): an unknown key anywhere,
or a value of the wrong kind, is a malformed record that every reader refuses, so no
commit can add a flag or a package that makes a replay look like another environment."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from dlm_git.lock.errors import LockError
from dlm_git.lock.io import parse_lock, parse_lock_json
from tests.support.records import LOCK_RECORD, lock_record

SUBJECT = "demo/dlm.lock"

V3 = LOCK_RECORD["determinism_flags"]
"""The flags a dlm-git writes under the portable `x86-64-v3` profile."""
LEGACY_FLAGS = {
    "cpu_capability": "AVX2",
    "deterministic_algorithms": True,
    "device": "cpu",
    "interop_threads": 1,
    "machine": "x86_64",
    "threads": 2,
}
"""What a dlm-git wrote before numerics profiles (with `interop_threads`)."""
LEGACY_VERSIONS = {**LOCK_RECORD["pinned_versions"], "torch": "2.13.0"}
RANKS = {"world_size": 2, "backend": "gloo", "bucket_elements": 1 << 22, "sharding": "group-stride"}


def lock_with(edit: Callable[[dict[str, Any]], None]) -> bytes:
    obj = lock_record(determinism_flags=dict(V3))
    edit(obj)
    return json.dumps(obj).encode("utf-8")


def flags(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda obj: obj["determinism_flags"].update(changes)


def versions(**changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda obj: obj["pinned_versions"].update(changes)


def test_every_record_a_dlm_git_writes_parses() -> None:
    for edit in (
        flags(),
        flags(distributed=dict(RANKS)),
        flags(numerics="native", mkl_cbwr=None, cpu_vendor="AuthenticAMD", cpu_isa="avx512"),
        lambda obj: obj["pinned_versions"].pop("accelerate"),  # not installed there
        lambda obj: obj["determinism_flags"].pop("numerics"),  # before profiles
    ):
        parse_lock(lock_with(edit), SUBJECT)
    legacy = lock_record(determinism_flags=LEGACY_FLAGS, pinned_versions=LEGACY_VERSIONS)
    parse_lock(json.dumps(legacy).encode(), SUBJECT)  # the legacy shape (interop_threads)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (flags(bits_expected=False), "determinism_flags.'bits_expected': unknown key"),
        (flags(**{"": 1}), "unknown key"),
        (flags(distributed={**RANKS, "overlap": True}), "distributed.'overlap': unknown key"),
        (flags(distributed={**RANKS, "world_size": 1}), "world_size 1"),
        (flags(distributed=[2]), "distributed is not an object"),
        (versions(cuda_kernels="1.0"), "pinned_versions.'cuda_kernels': unknown package"),
        (versions(numpy="2.4.6\nnumpy 1.0"), "pinned_versions.numpy"),
        (versions(peft=0.21), "pinned_versions.peft"),
        (lambda obj: obj["pinned_versions"].pop("torch"), "no torch version"),
        (flags(threads=-1), "threads -1"),
        (flags(threads=True), "threads True"),
        (flags(deterministic_algorithms="yes"), "deterministic_algorithms 'yes'"),
        (flags(mkl_cbwr="AVX512,STRICT"), "contradicts profile x86-64-v3"),
        (flags(cpu_capability="AVX512"), "cpu_capability 'AVX512' contradicts"),
        (flags(device="cuda"), "device 'cuda' contradicts"),
        (flags(gpu_name="\x1b]0;owned\x07"), "gpu_name"),
        (lambda obj: obj.__setitem__("determinism_flags", [1]), "not an object"),
        (lambda obj: obj.__setitem__("tolerance", 1.0), "'tolerance': unknown key"),
        (lambda obj: obj["license_acceptance"].update(waived=True), "'waived': unknown key"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_field_no_dlm_git_writes_is_a_malformed_lock(
    edit: Callable[[dict[str, Any]], None], needle: str
) -> None:
    with pytest.raises(LockError) as info:
        parse_lock_json(lock_with(edit), SUBJECT)
    text = info.value.one_line()
    assert SUBJECT in text and "malformed lock" in text and needle in text, text
    assert "\n" not in text and "\x1b" not in text


def test_the_top_level_keys_are_the_schemas() -> None:
    from dlm_git.lock.fields import LICENSE_KEYS, LOCK_KEYS
    from dlm_git.lock.schema import LicenseAcceptance, Lock

    assert set(Lock.model_fields) == LOCK_KEYS
    assert set(LicenseAcceptance.model_fields) == LICENSE_KEYS
