"""Preparing a training process: the single place that seeds and pins it.

Invariants:
- `prepare` is the single place that seeds RNGs and pins the numerical environment
  (numerics profile variables, threads, deterministic algorithms, cuBLAS workspace, TF32,
  cuDNN), and describes the result. Which kernels a profile selects is the table's
  (`numerics.table`), what it records is `numerics.record`'s; this module applies them.
- `Environment.flags` is what `dlm.lock` stores under `determinism_flags` and what a
  replay re-applies: plain JSON values, only facts that change the bits under the profile.
- The determinism class comes from this dlm-git's profile table (`judge.determinism_class`).
- torch and numpy are imported inside the functions that need them, after `activate`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
from dataclasses import dataclass
from typing import Any

from dlm_git.numerics.activate import activate
from dlm_git.numerics.judge import determinism_class
from dlm_git.numerics.plan import Plan, check_threads, choose
from dlm_git.numerics.probe import cuda_problem, diagnosis, nvidia_driver
from dlm_git.numerics.record import cpu_flags_record, cuda_flags_record
from dlm_git.numerics.table import CUBLAS_WORKSPACE, DeterminismClass, NumericsError, Profile


@dataclass(frozen=True)
class HardwareInfo:
    tier: str
    device: str
    details: dict[str, Any]


def select_device(requested: str) -> str:
    import torch

    if requested == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if requested.startswith("cuda"):
        problem = cuda_problem()
        if problem is not None:
            raise NumericsError(
                "--device",
                f"{requested} requested but {problem}",
                "use --device cpu (or auto), or a CUDA build of torch on a GPU machine",
            )
    if requested == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise NumericsError("--device", "mps requested but not available here", "use cpu")
    return requested


def detect_hardware(device: str, threads: int) -> HardwareInfo:
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        hip = getattr(torch.version, "hip", None)
        tier = "rocm" if hip else ("cuda-sm80+" if props.major >= 8 else "cuda-sm<80")
        return HardwareInfo(
            tier=tier,
            device="cuda",
            details={
                "gpu_name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "driver": nvidia_driver(),
                "cuda_version": torch.version.cuda,
                "rocm_version": hip,
                **diagnosis(),
            },
        )
    if device == "mps":
        return HardwareInfo(tier="mps", device="mps", details={"machine": platform.machine()})
    return HardwareInfo(tier="cpu", device="cpu", details={"threads": threads, **diagnosis()})


def seed_host_rngs(seed: int) -> None:
    """Seed Python's and numpy's global RNGs: the state a fresh training loop starts from
    (and what a segment snapshot records of them)."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)


def apply_determinism(seed: int, device: str, threads: int) -> None:
    """Seed every RNG and pin threads and algorithms. Call before building the model."""
    if device.startswith("cuda"):
        # Must be in the environment before cuBLAS initialises.
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    import torch

    seed_host_rngs(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # settable once per process only
        torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    if device.startswith("cuda"):
        torch.cuda.manual_seed_all(seed)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def determinism_flags(profile: Profile, hw: HardwareInfo, threads: int) -> dict[str, Any]:
    """The recorded numerical environment (after `apply_determinism`)."""
    if hw.device == "cuda":
        return cuda_flags_record(profile)
    flags = cpu_flags_record(profile, threads)
    if hw.device == "mps":
        flags["device"] = "mps"
    return flags


@dataclass(frozen=True)
class Environment:
    """What a run on this machine records: device, profile, tier, flags and class."""

    device: str
    profile: Profile
    hardware: HardwareInfo
    flags: dict[str, Any]
    klass: DeterminismClass


def prepare(seed: int, run: Plan, threads: int | None = None) -> Environment:
    """Pin the planned profile, select the device, seed and pin everything, describe it."""
    n = check_threads(threads)
    activate(run.env)
    dev = select_device(run.device)
    profile = run.profile or choose(None, None, dev)
    apply_determinism(seed, dev, n)
    hw = detect_hardware(dev, n)
    flags = determinism_flags(profile, hw, n)
    return Environment(dev, profile, hw, flags, determinism_class(flags, hw.tier))
