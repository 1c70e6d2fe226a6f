"""Numerics profiles: choosing, refusing, what a replay forces, and when bits are expected.

No training here: these are the decisions `dlm_git.numerics` makes before torch runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlm_git.errors import UsageError
from dlm_git.numerics import activate, judge, plan, probe, table
from dlm_git.numerics.table import NATIVE, X86_64_V3, NumericsError

ON_X86 = probe.machine() == "x86_64"
x86_only = pytest.mark.skipif(not ON_X86, reason="x86-64 profiles")

V3_FLAGS: dict[str, Any] = {
    "numerics": X86_64_V3,
    "device": "cpu",
    "threads": 2,
    "deterministic_algorithms": True,
    "machine": "x86_64",
    "cpu_capability": "AVX2",
    "mkl_cbwr": "AVX2,STRICT",
    "onednn_max_cpu_isa": "AVX2",
}
VERSIONS = {"torch": "2.13.0+cpu", "peft": "0.21.2"}
# /proc/cpuinfo of a CPU without AVX2 (Sandy Bridge era): AVX but no AVX2/FMA/BMI.
OLD_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt aes xsave avx
"""


@pytest.fixture
def old_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cpuinfo"
    path.write_text(OLD_CPUINFO, "utf-8")
    monkeypatch.setattr(probe, "CPUINFO", str(path))


@x86_only
def test_the_cpu_default_on_x86_64_is_the_portable_profile() -> None:
    assert plan.default_profile("cpu") == X86_64_V3
    assert plan.default_profile("cuda") == table.CUDA
    assert plan.default_profile("cuda:1") == table.CUDA
    assert plan.choose(None, None, "cpu").name == X86_64_V3


def test_the_command_line_wins_over_the_document() -> None:
    assert plan.choose(NATIVE, X86_64_V3, "cpu").name == NATIVE
    assert plan.choose("auto", NATIVE, "cpu").name == NATIVE


@pytest.mark.parametrize(
    ("requested", "device", "message"),
    [
        ("x86-64-v9", "cpu", "unknown numerics profile 'x86-64-v9'"),
        ("cuda", "cpu", "profile 'cuda' trains on CUDA"),
        (X86_64_V3, "cuda", "is a CPU profile and cannot train on cuda"),
    ],
)
def test_misuse_is_a_usage_error(requested: str, device: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        plan.choose(requested, None, device)
    assert message in info.value.one_line()
    assert info.value.exit_code == 2


@x86_only
def test_another_architectures_profile_is_refused_in_one_line() -> None:
    with pytest.raises(NumericsError) as info:
        plan.choose(table.ARMV8_A, None, "cpu")
    line = info.value.one_line()
    assert "needs an aarch64 CPU; this machine is x86_64" in line and "\n" not in line
    assert info.value.exit_code == 1


@x86_only
def test_a_cpu_without_avx2_cannot_run_the_portable_profile(old_cpu: None) -> None:
    problem = probe.cannot_run(table.PROFILES[X86_64_V3])
    assert problem == "this CPU lacks abm, avx2, bmi1, bmi2, f16c, fma, movbe"
    with pytest.raises(NumericsError) as info:
        plan.choose(None, None, "cpu")
    assert "choose --numerics native" in info.value.one_line()
    assert probe.cannot_run(table.PROFILES[NATIVE]) is None
    assert probe.isa_level(probe.cpu_info()[2]) == "sse4.2"


def test_a_native_replay_forces_what_the_run_recorded() -> None:
    recorded = {
        **V3_FLAGS,
        "numerics": NATIVE,
        "cpu_capability": "AVX512",
        "mkl_cbwr": None,
        "onednn_max_cpu_isa": "AVX512_CORE",
    }
    env = activate.target_environment(table.PROFILES[NATIVE], recorded)
    assert env == {
        "ATEN_CPU_CAPABILITY": "avx512",
        "MKL_CBWR": None,  # unset, as it was
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
    }
    # A pinned profile forces its own pins whatever was recorded.
    assert activate.target_environment(table.PROFILES[X86_64_V3], recorded) == {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_CBWR": "AVX2,STRICT",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    }
    # Training under native (no record) forces nothing.
    assert activate.target_environment(table.PROFILES[NATIVE], None) == {}


def test_a_childs_environment_has_the_forced_variables() -> None:
    base = {"PATH": "/bin", "MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default"}
    out = activate.apply_to(base, {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": None})
    assert out == {"PATH": "/bin", "ATEN_CPU_CAPABILITY": "avx2"}
    assert base["MKL_CBWR"] == "COMPATIBLE"  # the caller's mapping is untouched


@x86_only
def test_this_session_runs_torch_under_the_portable_pins() -> None:
    """tests/conftest.py activated the default profile before torch was imported: a run
    needing other kernel settings must go to a child process."""
    import torch

    assert torch.backends.cpu.get_cpu_capability() == "AVX2"
    pins = dict(table.PROFILES[X86_64_V3].pins)
    assert activate.can_run_in_process(pins)
    assert activate.can_run_in_process({})
    assert not activate.can_run_in_process({**pins, "ATEN_CPU_CAPABILITY": "default"})
    assert not activate.can_run_in_process({"MKL_CBWR": None})
    with pytest.raises(NumericsError):
        activate.activate({"ATEN_CPU_CAPABILITY": "avx512"})


def test_bits_are_expected_under_the_same_profile_facts_and_versions() -> None:
    e = judge.expect_bits(V3_FLAGS, dict(V3_FLAGS), VERSIONS, dict(VERSIONS), "cpu")
    assert e.bits and "x86-64-v3" in e.reason


@pytest.mark.parametrize(
    ("recorded", "replayed", "versions", "reason"),
    [
        ({**V3_FLAGS, "threads": 4}, V3_FLAGS, VERSIONS, "threads 4 -> 2"),
        (V3_FLAGS, V3_FLAGS, {**VERSIONS, "peft": "0.22.0"}, "peft 0.22.0 -> 0.21.2"),
        (
            {k: v for k, v in V3_FLAGS.items() if k != "numerics"},
            V3_FLAGS,
            VERSIONS,
            "numerics None -> 'x86-64-v3'",
        ),
        ({**V3_FLAGS, "numerics": "x86-64-v9"}, V3_FLAGS, VERSIONS, "'x86-64-v9' -> 'x86-64-v3'"),
        ({**V3_FLAGS, "numerics": "armv8-a"}, V3_FLAGS, VERSIONS, "'armv8-a' -> 'x86-64-v3'"),
        (
            {**V3_FLAGS, "deterministic_algorithms": False},
            V3_FLAGS,
            VERSIONS,
            "deterministic_algorithms False -> True",
        ),
        (
            {**V3_FLAGS, "numerics": NATIVE, "cpu_vendor": "GenuineIntel", "cpu_isa": "avx512"},
            {**V3_FLAGS, "numerics": NATIVE, "cpu_vendor": "AuthenticAMD", "cpu_isa": "avx512"},
            VERSIONS,
            "cpu_vendor 'GenuineIntel' -> 'AuthenticAMD'",
        ),
        (V3_FLAGS, V3_FLAGS, {**VERSIONS, "numpy": "1.26.4"}, "numpy 1.26.4 -> "),
    ],
    ids=[
        "threads",
        "versions",
        "legacy",
        "unknown",
        "unmeasured",
        "nondeterministic",
        "vendor",
        "numpy",
    ],
)
def test_bits_are_not_expected_and_the_reason_says_why(
    recorded: dict[str, Any], replayed: dict[str, Any], versions: dict[str, str], reason: str
) -> None:
    """Another environment recorded: no bits expected, and what differs is named."""
    e = judge.expect_bits(recorded, replayed, versions, VERSIONS, "cpu")
    assert not e.bits
    assert reason in e.reason, e.reason
    assert e.differs and any(reason.strip(" ->") in d for d in e.differs), e.differs


def test_the_promise_is_judged_from_the_replays_own_facts() -> None:
    """The record cannot lower the bar: the class comes from what the replay observed.
    A replay that itself ran without deterministic algorithms promises nothing, whatever
    the record says."""
    loose = {**V3_FLAGS, "deterministic_algorithms": False}
    e = judge.expect_bits(V3_FLAGS, loose, VERSIONS, VERSIONS, "cpu")
    assert not e.bits and "advisory" in e.reason and not e.differs, e


def test_cuda_is_best_effort_until_a_tier_is_measured() -> None:
    flags = {
        "numerics": "cuda",
        "device": "cuda",
        "deterministic_algorithms": True,
        "cublas_workspace_config": ":4096:8",
        "cudnn_deterministic": True,
        "cudnn_benchmark": False,
        "tf32_matmul": False,
        "tf32_cudnn": False,
    }
    assert judge.determinism_class(flags, "cuda-sm80+") == "best-effort"
    assert judge.determinism_class({**flags, "tf32_matmul": True}, "cuda-sm80+") == "advisory"
    assert not judge.expect_bits(flags, flags, VERSIONS, VERSIONS, "cuda-sm80+").bits
