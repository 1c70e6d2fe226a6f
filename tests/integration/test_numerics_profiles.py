"""Numerics profiles on real training: other machines simulated by their environment.

A CPU with other kernels shows up to torch as another ATen capability and another MKL or
oneDNN code path. These tests launch the golden fixture's training in fresh interpreters
with the outer environment such a machine would produce (`ATEN_CPU_CAPABILITY`,
`MKL_CBWR`, `ONEDNN_MAX_CPU_ISA`): under the portable profile every variant must give the
same adapter bytes and the same lock; under `native` the same variables must change the
bits, which proves the comparison can see a difference.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dlm_git.numerics import probe, table
from tests.support.cli import cli
from tests.support.golden import FixtureRun, train_fixture_at

pytestmark = pytest.mark.skipif(
    probe.machine() != "x86_64" or probe.cannot_run(table.PROFILES[table.X86_64_V3]) is not None,
    reason="needs an x86-64 CPU with AVX2",
)

# What other CPUs' environments look like to torch (ATen values are lower case).
OTHER_MACHINES: dict[str, dict[str, str]] = {
    "this machine": {},
    "no-simd ATen": {"ATEN_CPU_CAPABILITY": "default"},
    "AVX512 box": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX512"},
    "MKL compatible path": {"MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
PORTABLE_PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AVX2,STRICT",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}


def train(root: Path, name: str, profile: str, outer: dict[str, str]) -> FixtureRun:
    return train_fixture_at(root / name, numerics=profile, outer_env=outer, device="cpu")


@pytest.fixture(scope="module")
def portable_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FixtureRun]:
    root = tmp_path_factory.mktemp("portable")
    return {
        label: train(root, f"run-{i}", table.X86_64_V3, env)
        for i, (label, env) in enumerate(OTHER_MACHINES.items())
    }


@pytest.mark.slow
def test_the_portable_profile_gives_the_same_bits_on_every_simulated_cpu(
    portable_runs: dict[str, FixtureRun],
) -> None:
    shas = {label: run.adapter_sha256 for label, run in portable_runs.items()}
    assert len(set(shas.values())) == 1, shas
    locks = {json.dumps(run.lock, sort_keys=True) for run in portable_runs.values()}
    assert len(locks) == 1, "the lock must not record which machine trained"
    flags = portable_runs["this machine"].lock["determinism_flags"]
    assert flags["numerics"] == "x86-64-v3" and flags["cpu_capability"] == "AVX2"
    assert flags["mkl_cbwr"] == "AVX2,STRICT" and flags["onednn_max_cpu_isa"] == "AVX2"
    assert portable_runs["this machine"].lock["determinism_class"] == "strong"


@pytest.mark.slow
def test_native_sees_the_difference_the_portable_profile_removes(
    tmp_path: Path, portable_runs: dict[str, FixtureRun]
) -> None:
    portable = portable_runs["this machine"].adapter_sha256
    # native with exactly the portable pins in its environment is the same code path ...
    pinned = train(tmp_path, "native-pinned", table.NATIVE, PORTABLE_PINS)
    assert pinned.adapter_sha256 == portable
    assert pinned.lock["determinism_flags"]["cpu_capability"] == "AVX2"
    # ... and another ATen capability or another MKL path changes the bits.
    no_simd = train(tmp_path, "native-default", table.NATIVE, OTHER_MACHINES["no-simd ATen"])
    assert no_simd.lock["determinism_flags"]["cpu_capability"] == "DEFAULT"
    assert no_simd.adapter_sha256 != portable
    mkl = train(tmp_path, "native-mkl", table.NATIVE, {**PORTABLE_PINS, "MKL_CBWR": "COMPATIBLE"})
    assert mkl.lock["determinism_flags"]["mkl_cbwr"] == "COMPATIBLE"
    assert mkl.adapter_sha256 != portable
    native_flags = no_simd.lock["determinism_flags"]
    assert native_flags["numerics"] == "native"
    assert {"cpu_vendor", "cpu_isa"} <= set(native_flags), "native names its CPU path"


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "env", "code", "needles"),
    [
        (("--numerics", "x86-64-v9"), {}, 2, ("unknown numerics profile 'x86-64-v9'",)),
        (("--numerics", "armv8-a"), {}, 1, ("needs an aarch64 CPU",)),
        (("--numerics", "cuda"), {}, 2, ("trains on CUDA", "--device cuda")),
        (("--threads", "0"), {}, 2, ("--threads: must be from 1 to 1024, got 0",)),
        ((), {"DLM_GIT_THREADS": "abc"}, 2, ("DLM_GIT_THREADS", "'abc'")),
    ],
    ids=["unknown", "other-arch", "cuda-profile-on-cpu", "threads-0", "threads-env"],
)
def test_bad_numerics_input_is_one_line(
    tmp_path: Path,
    write_doc: object,
    args: tuple[str, ...],
    env: dict[str, str],
    code: int,
    needles: tuple[str, ...],
) -> None:
    doc = write_doc(tmp_path / "d")  # type: ignore[operator]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    one_line_error(cli("train", str(doc), "--device", "cpu", *args, env=env), code, *needles)


def test_cuda_without_a_cuda_build_is_one_line(tmp_path: Path, write_doc: object) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    doc = write_doc(tmp_path / "d")  # type: ignore[operator]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    one_line_error(cli("train", str(doc), "--device", "cuda"), 1, "--device: cuda requested")


def test_an_unknown_profile_in_the_document_names_the_key(
    tmp_path: Path, write_doc: object, run_cli: Any
) -> None:
    doc = write_doc(tmp_path / "d", frontmatter="training:\n  numerics: fastest")  # type: ignore[operator]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    code, _, err = run_cli("train", doc, "--device", "cpu")
    assert code != 0 and "numerics" in err and "fastest" in err and "Traceback" not in err, err


def test_doctor_shows_the_profile_its_pins_and_where_it_runs() -> None:
    proc = cli("doctor", "--json", env={"ATEN_CPU_CAPABILITY": "default"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["numerics"]["name"] == "x86-64-v3"
    assert report["numerics"]["pins"] == PORTABLE_PINS
    assert report["determinism_flags"]["cpu_capability"] == "AVX2"  # pinned over the env
    assert report["determinism_class"] == "strong"
    runs = {p["name"]: p["runnable_here"] for p in report["profiles"]}
    assert runs["x86-64-v3"] and runs["native"] and not runs["armv8-a"]
    assert {"cpu_model", "cpu_vendor", "cpu_isa"} <= set(report["machine"])
    refused = cli("doctor", "--numerics", "armv8-a")
    assert refused.returncode == 1 and "needs an aarch64 CPU" in refused.stderr
