"""Replay verdicts are right on the auditor's machine, in both directions.

The verified repository was trained under the portable profile. An auditor whose CPU
would pick other kernels (simulated by its environment) must still get BITWISE; a record
this machine cannot reproduce or compare must get CANNOT_VERIFY with the reason, never a
MISMATCH without a comparison that failed; a profile this machine cannot run is named.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from dlm_git.numerics import probe, table
from tests.support.env import run
from tests.support.older import older_form
from tests.support.verdicts import assert_verified

pytestmark = pytest.mark.skipif(
    probe.machine() != "x86_64" or probe.cannot_run(table.PROFILES[table.X86_64_V3]) is not None,
    reason="needs an x86-64 CPU with AVX2",
)

# The environment of a CPU whose kernels differ from AVX2's (as an AVX512 box's would).
FOREIGN_CPU = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
# What an aarch64 machine records under the portable armv8-a profile.
ARM_RECORD = {
    "numerics": "armv8-a",
    "machine": "aarch64",
    "cpu_capability": "DEFAULT",
    "mkl_cbwr": None,
    "onednn_max_cpu_isa": "ADVANCED_SIMD",
    "openblas_coretype": "ARMV8",
}
# A record from before numerics profiles: only the flags the old trainer wrote.
LEGACY_FLAGS = ("cpu_capability", "deterministic_algorithms", "device", "machine", "threads")


def foreign(monkeypatch: pytest.MonkeyPatch, env: dict[str, str] = FOREIGN_CPU) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


@pytest.mark.slow
def test_replay_on_a_cpu_with_other_kernels_is_bitwise(
    forge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert forge.lock()["determinism_flags"]["numerics"] == "x86-64-v3"
    foreign(monkeypatch)
    result = forge.verify_cli("HEAD", "--level", "replay")
    assert result.code == 0 and result.verdict == "BITWISE", result.explain()
    assert "x86-64-v3" in result.check("replay.profile")["detail"], result.explain()


@pytest.mark.slow
def test_segment_replay_on_a_cpu_with_other_kernels_is_bitwise(
    forge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    foreign(monkeypatch)
    result = forge.verify_cli("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert result.code == 0 and result.verdict == "SEGMENTS_BITWISE", result.explain()


def legacy(forge: Any) -> None:
    """Rewrite the lock as the trainer before profiles wrote it (rebound consistently),
    with no eval record (evaluation came after profiles)."""
    lock = forge.lock()
    lock["determinism_flags"] = {
        k: v for k, v in lock["determinism_flags"].items() if k in LEGACY_FLAGS
    }
    forge.write_lock(lock)
    for name in ("eval.json", "eval_metrics.json"):  # from before evaluation, too
        (forge.root / "demo" / name).unlink(missing_ok=True)
    forge.commit("a lock from before numerics profiles")


@pytest.mark.slow
def test_no_expected_bits_and_nothing_to_compare_is_cannot_verify_not_mismatch(
    forge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The false accusation of issue 12: a record whose kernel path this machine does not
    take, replayed with the recorded adapter absent from the DVC cache; without the
    auditor's --tolerance, and with it."""
    legacy(forge)
    assert_verified(forge.verify("HEAD"))
    shutil.rmtree(forge.root / ".dvc" / "cache")
    foreign(monkeypatch, {"MKL_CBWR": "COMPATIBLE"})
    result = forge.verify_cli("HEAD", "--level", "replay")
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", result.explain()
    detail = result.check("replay")["detail"]
    assert "bit equality not expected" in detail and "numerics None ->" in detail, detail
    assert "--tolerance" in detail, detail
    asked = forge.verify_cli("HEAD", "--level", "replay", "--tolerance", "1e-3")
    assert asked.code == 1 and asked.verdict == "CANNOT_VERIFY", asked.explain()
    assert "not available to compare within tolerance" in asked.check("replay")["detail"]


@pytest.mark.slow
def test_the_same_record_replays_bitwise_once_its_kernels_are_pinned(
    forge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The legacy record names ATen's capability (AVX2), which the replay pins; with MKL
    and oneDNN on their AVX2 paths too the recorded bits come back. A record from before
    profiles is from before the model card too (the card names the recorded profile)."""
    legacy(forge)
    older_form(forge)
    shutil.rmtree(forge.root / ".dvc" / "cache")
    pins = dict(table.PROFILES["x86-64-v3"].pins)
    foreign(monkeypatch, {**pins, "ATEN_CPU_CAPABILITY": "default"})  # ATen: recorded AVX2
    result = forge.verify_cli("HEAD", "--level", "replay")
    assert result.code == 0 and result.verdict == "BITWISE", result.explain()


@pytest.mark.slow
def test_a_tolerance_comparison_that_ran_and_failed_is_a_mismatch(
    forge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bits not expected, the recorded adapter present: the auditor's tolerance decides;
    the commit's own params.yaml (even an infinite tolerance) is never consulted."""
    legacy(forge)
    params = forge.read("params.yaml").decode("utf-8")
    forge.write("params.yaml", (params + "verify:\n  tolerance:\n    max_rel_l2: .inf\n").encode())
    forge.commit("a generous tolerance")
    foreign(monkeypatch, {"MKL_CBWR": "COMPATIBLE"})
    unasked = forge.verify_cli("HEAD", "--level", "replay")
    assert unasked.code == 1 and unasked.verdict == "CANNOT_VERIFY", unasked.explain()
    close = forge.verify_cli("HEAD", "--level", "replay", "--tolerance", "1e-3")
    assert close.code == 0 and close.verdict == "WITHIN_TOLERANCE", close.explain()
    strict = forge.verify_cli("HEAD", "--level", "replay", "--tolerance", "0")
    assert strict.code == 1 and strict.verdict == "MISMATCH", strict.explain()
    assert "tolerance 0" in strict.check("replay")["detail"], strict.explain()


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "2"])
def test_an_unusable_tolerance_is_refused(forge: Any, value: str) -> None:
    result = forge._call_main(["verify", "HEAD", "--level", "replay", "--tolerance", value])
    assert result.code == 2 and "--tolerance" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("flags", "verdict", "needle"),
    [
        (ARM_RECORD, "CANNOT_VERIFY", "needs an aarch64 CPU"),
        ({"numerics": "x86-64-v9"}, "CANNOT_VERIFY", "unknown numerics profile 'x86-64-v9'"),
        ({"threads": -1}, "FAILED", "threads -1"),
        ({"threads": "abc"}, "FAILED", "threads 'abc'"),
        ({"threads": True}, "FAILED", "threads True"),
        ({"numerics": "native", "mkl_cbwr": "AVX2\x00"}, "FAILED", "mkl_cbwr"),
        ({"numerics": "native", "cpu_capability": "x" * 100}, "FAILED", "cpu_capability"),
        ({"numerics": "native", "onednn_max_cpu_isa": ["AVX2"]}, "FAILED", "onednn_max_cpu_isa"),
    ],
    ids=[
        "other-arch",
        "unknown-profile",
        "threads-negative",
        "threads-text",
        "threads-bool",
        "setting-nul",
        "setting-long",
        "setting-list",
    ],
)
def test_a_recorded_setup_this_machine_cannot_run_or_that_is_malformed(
    forge: Any, flags: dict[str, Any], verdict: str, needle: str
) -> None:
    lock = forge.lock()
    lock["determinism_flags"].update(flags)
    forge.write_lock(lock)
    forge.commit("another setup")
    result = forge.verify("HEAD", "--level", "replay")  # refused before anything trains
    assert result.code == 1 and result.verdict == verdict, result.explain()
    # a malformed value is refused when the lock is read (lock.parse, and the replay
    # launches nothing); a well-formed record this machine cannot run, by replay.profile
    name = "replay.profile" if verdict == "CANNOT_VERIFY" else "replay"
    assert needle in result.check(name)["detail"], result.explain()
    if verdict == "FAILED":
        assert needle in result.check("lock.parse")["detail"], result.explain()


def test_cuda_recorded_on_a_machine_without_cuda_names_what_would_verify_it(forge: Any) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    lock = forge.lock()
    lock["hardware_tier"] = "cuda-sm80+"
    lock["determinism_flags"] = {
        "numerics": "cuda",
        "device": "cuda",
        "threads": 2,
        "deterministic_algorithms": True,
        "gpu_name": "NVIDIA H200",
        "gpu_capability": "9.0",
        "cuda_version": "13.0",
    }
    forge.write_lock(lock)
    forge.commit("trained on a GPU")
    result = forge.verify("HEAD", "--level", "replay")
    assert result.verdict == "CANNOT_VERIFY", result.explain()
    detail = result.check("replay.profile")["detail"]
    assert "no CUDA support" in detail and "NVIDIA H200 (sm 9.0) with CUDA 13.0" in detail


@pytest.mark.slow
def test_a_replay_under_another_profile_runs_in_a_child_process(
    forge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This test process runs torch under the portable pins (tests/conftest.py). A record
    trained under `native` on a no-SIMD ATen path needs other kernels: the in-process
    replay must train in a fresh interpreter that pins them, and reproduce the bits."""
    commit_trained_on_another_path(forge, monkeypatch)
    result = forge.verify("HEAD", "--level", "replay")  # in-process
    assert result.code == 0 and result.verdict == "BITWISE", result.explain()


@pytest.mark.slow
def test_a_segment_replay_under_another_profile_runs_in_a_child_process(
    forge: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for segments: the in-process check hands the document's report to a
    fresh interpreter that pins the recorded kernels (`python -m dlm_git.verify.segments`),
    which replays the sampled segment bit for bit and answers with the whole report."""
    commit_trained_on_another_path(forge, monkeypatch)
    result = forge.verify("HEAD", "--level", "segments", "--sample", "1", "--seed", "0")
    assert result.code == 0 and result.verdict == "SEGMENTS_BITWISE", result.explain()
    names = [c["name"] for c in result.doc["checks"]]
    assert names.count("segments.chain") == 1 and names.count("segments.replay") == 1, names
    assert any(not n.startswith("segments.") for n in names), "the hash level's checks stay"
    assert any("replaying segments [" in n for n in result.doc["notes"]), result.explain()


def commit_trained_on_another_path(forge: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Retrain the record under `native` on the no-SIMD ATen path and commit it; and make
    sure torch runs in this process under the portable pins (whatever ran before), so
    that a replay of the record here cannot pin its kernels in-process."""
    import torch

    torch.zeros(1).sum()
    params = forge.read("params.yaml").decode("utf-8")
    forge.write("params.yaml", params.replace("numerics: auto", "numerics: native").encode())
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    run(["dvc", "repro"], forge.root)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    forge.commit("trained under native on the no-SIMD path")
    flags = forge.lock()["determinism_flags"]
    assert flags["numerics"] == "native" and flags["cpu_capability"] == "DEFAULT", flags
