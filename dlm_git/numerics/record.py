"""What a training run records of its numerical environment, read from torch.

Invariants:
- The record (`dlm.lock`'s `determinism_flags`) holds only facts that change the bits
  under the profile: a pinned profile records its pins and what ATen reports; `native`
  records whatever the environment set, and the CPU vendor and ISA level. No
  timestamps, hostnames or paths. Facts that do not change the bits are
  `probe.diagnosis`: shown by `doctor`, never drift.
- Called after torch is imported under the profile: a CPU run whose ATen capability is
  not the profile's is refused, never recorded.
"""

from __future__ import annotations

import os
from typing import Any

from dlm_git.numerics.activate import initialised_with
from dlm_git.numerics.probe import (
    cpu_info,
    cublas_version,
    cudnn_version,
    isa_level,
    machine,
    nccl_version,
    nvidia_driver,
)
from dlm_git.numerics.table import FLAG_OF_VARIABLE, NATIVE, NumericsError, Profile


def cpu_flags_record(profile: Profile, threads: int) -> dict[str, Any]:
    """The bit-relevant facts of a CPU run under `profile` (torch imported, pinned)."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    if profile.aten_capability is not None and capability != profile.aten_capability:
        raise NumericsError(
            f"numerics profile {profile.name}",
            f"ATen reports CPU capability {capability}, the profile needs"
            f" {profile.aten_capability}",
            "this torch build or CPU cannot run the profile; choose --numerics native",
        )
    env = initialised_with()
    flags: dict[str, Any] = {
        "numerics": profile.name,
        "device": "cpu",
        "threads": threads,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "machine": machine(),
        "cpu_capability": capability,
    }
    # A pinned profile records its pins; `native` records whatever the environment set
    # for the libraries torch uses on this architecture.
    variables = list(profile.pins) if profile.name != NATIVE else native_variables()
    for variable in variables:
        if variable != "CUBLAS_WORKSPACE_CONFIG" and variable in FLAG_OF_VARIABLE:
            flags[FLAG_OF_VARIABLE[variable]] = env.get(variable)
    if profile.name == NATIVE:
        vendor, _, cpu = cpu_info()
        flags["cpu_vendor"] = vendor
        flags["cpu_isa"] = isa_level(cpu)
    return flags


def native_variables() -> list[str]:
    """The kernel variables that select torch's CPU code paths on this architecture."""
    if machine() == "aarch64":
        return ["ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE"]
    return ["MKL_CBWR", "ONEDNN_MAX_CPU_ISA"]


def cuda_flags_record(profile: Profile) -> dict[str, Any]:
    """The recorded facts of a CUDA run: device, libraries and the deterministic set."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "numerics": profile.name,
        "device": "cuda",
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "threads": torch.get_num_threads(),
        "gpu_name": props.name,
        "gpu_capability": f"{props.major}.{props.minor}",
        "driver": nvidia_driver(),
        "cuda_version": torch.version.cuda,
        "cublas_version": cublas_version(),
        "cudnn_version": cudnn_version(),
        "nccl_version": nccl_version(),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
    }
