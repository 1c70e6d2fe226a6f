"""The commit never sets the bar it is judged by (issue 23, class 1).

The forgery: an adapter one rounding step away from the honest one, re-bound through every
record (the manifest's adapter record, dvc.lock, the DVC cache), so the hash level cannot
tell it from the honest one and only a replay can. Where bits are expected the replay
catches it (MISMATCH). The lock may not talk the replay out of expecting bits: a key no
dlm-git writes is a malformed record (FAILED, nothing launched), and a recorded
environment other than the replay's (another library version, another kernel fact) is
CANNOT_VERIFY naming what to replay under: never a tolerance verdict unless the auditor
asks for one with `--tolerance`, and never exit 0 under `--strict`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dlm_git.numerics import probe, table
from tests.support.tensorfiles import flip_ulp
from tests.support.verdicts import assert_caught, assert_verified
from tests.support.verified import WEIGHTS

pytestmark = pytest.mark.skipif(
    probe.machine() != "x86_64" or probe.cannot_run(table.PROFILES[table.X86_64_V3]) is not None,
    reason="needs an x86-64 CPU with AVX2",
)


def round_the_adapter(forge: Any) -> None:
    """One ULP of one LoRA weight moved, every record re-bound as training would have."""
    files = forge.adapter_files()
    files[WEIGHTS] = flip_ulp(files[WEIGHTS])
    forge.store_adapter(files, rebind="all")


def edit_lock(forge: Any, edit: Callable[[dict[str, Any]], None]) -> None:
    lock = forge.lock()
    edit(lock)
    forge.write_lock(lock)  # lock_sha256 re-bound: the records agree with each other


@pytest.mark.slow
def test_a_rounding_step_is_a_mismatch_where_bits_are_expected(forge: Any) -> None:
    round_the_adapter(forge)
    forge.commit("an adapter one rounding step off")
    assert_verified(forge.verify("HEAD"))  # only a replay can tell
    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.code == 1 and result.verdict == "MISMATCH", result.explain()
    assert "bit equality expected" in result.check("replay")["detail"], result.explain()


@pytest.mark.parametrize(
    "edit",
    [
        lambda lock: lock["determinism_flags"].update(bits_expected=False),
        lambda lock: lock["determinism_flags"].update(rounding="loose"),
        lambda lock: lock["determinism_flags"].update(
            distributed={
                "world_size": 2,
                "backend": "gloo",
                "bucket_elements": 1 << 22,
                "sharding": "group-stride",
                "async": True,
            }
        ),
        lambda lock: lock["pinned_versions"].update(cuda_kernels="1.0"),
    ],
    ids=["unknown-flag", "another-unknown-flag", "unknown-topology-key", "unknown-package"],
)
def test_a_key_no_dlm_git_writes_fails_and_nothing_is_launched(
    forge: Any, edit: Callable[[dict[str, Any]], None]
) -> None:
    round_the_adapter(forge)
    edit_lock(forge, edit)
    forge.commit("a lock with a key of its own")
    result = forge.verify("HEAD", "--level", "replay", "--tolerance", "1")  # in-process
    assert_caught(result, "lock.parse")
    replay = result.check("replay")
    assert not replay["ok"] and "nothing replayed" in replay["detail"], result.explain()
    assert "malformed lock" in replay["detail"], result.explain()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda lock: lock["pinned_versions"].update(numpy="1.26.4"), "numpy 1.26.4 ->"),
        (lambda lock: lock["pinned_versions"].update(peft="0.13.0"), "peft 0.13.0 ->"),
        (
            lambda lock: lock["determinism_flags"].update(deterministic_algorithms=False),
            "deterministic_algorithms False -> True",
        ),
    ],
    ids=["numpy", "peft", "nondeterministic"],
)
def test_another_recorded_environment_is_cannot_verify_not_within_tolerance(
    forge: Any, edit: Callable[[dict[str, Any]], None], named: str
) -> None:
    round_the_adapter(forge)
    edit_lock(forge, edit)
    forge.commit("recorded under another environment")
    assert_verified(forge.verify("HEAD"))
    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", result.explain()
    detail = result.check("replay")["detail"]
    assert result.check("replay")["state"] == "absent", result.explain()
    assert named in detail and "--tolerance" in detail, detail
    assert "under profile x86-64-v3 with" in detail, detail  # how to get bits


@pytest.mark.slow
def test_a_tolerance_verdict_is_the_auditors_choice_and_never_passes_strict(forge: Any) -> None:
    round_the_adapter(forge)
    edit_lock(forge, lambda lock: lock["pinned_versions"].update(numpy="1.26.4"))
    forge.commit("recorded under another numpy")
    asked = forge.verify_here("HEAD", "--level", "replay", "--tolerance", "1e-3")
    assert asked.code == 0 and asked.verdict == "WITHIN_TOLERANCE", asked.explain()
    strict = forge.verify_here("HEAD", "--level", "replay", "--tolerance", "1e-3", "--strict")
    assert strict.code == 1 and strict.verdict == "WITHIN_TOLERANCE", strict.explain()
    assert strict.payload["verdict"] == "FAILED", strict.explain()


def test_tolerance_goes_with_the_replay_level(forge: Any) -> None:
    result = forge._call_main(["verify", "HEAD", "--tolerance", "1e-3"])
    assert result.code == 2 and "--tolerance" in result.stderr, result.stderr
