"""Determinism settings: the numerical environment of a training run, and its record.

Invariants:
- `prepare` is the single place that seeds RNGs and pins the numerical environment
  (numerics profile variables, threads, deterministic algorithms, cuBLAS workspace, TF32,
  cuDNN), and describes the result. Which kernels a profile selects, and what it records,
  is `dlm_git.numerics`; this module applies it.
- `Environment.flags` is what `dlm.lock` stores under `determinism_flags` and what a
  replay re-applies: plain JSON values, only facts that change the bits under the profile.
  No timestamps, hostnames or paths.
- The determinism class comes from this dlm-git's profile table (`numerics.determinism_class`):
  `strong` only for profiles the golden test has shown bit-exact; CUDA stays `best-effort`
  until a tier is measured (docs/determinism.md).
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlm_git import numerics
from dlm_git.errors import UsageError
from dlm_git.numerics import DeterminismClass, NumericsError, Profile

DEFAULT_THREADS = 2
MAX_THREADS = 1024
CUBLAS_WORKSPACE = numerics.CUBLAS_WORKSPACE


@dataclass(frozen=True)
class HardwareInfo:
    tier: str
    device: str
    details: dict[str, Any]


def default_threads() -> int:
    env = os.environ.get("DLM_GIT_THREADS")
    if not env:
        return DEFAULT_THREADS
    try:
        value = int(env)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_THREADS:
        raise UsageError(
            "DLM_GIT_THREADS",
            f"must be a whole number from 1 to {MAX_THREADS}, got {env!r}",
            "unset it or set e.g. DLM_GIT_THREADS=2",
        )
    return value


def check_threads(threads: int | None) -> int:
    """The thread count to pin: `threads`, else DLM_GIT_THREADS, else 2."""
    if threads is None:
        return default_threads()
    if not 1 <= threads <= MAX_THREADS:
        raise UsageError(
            "--threads", f"must be from 1 to {MAX_THREADS}, got {threads}", "e.g. --threads 2"
        )
    return threads


@dataclass(frozen=True)
class Plan:
    """What a run will pin, decided before torch is imported."""

    device: str
    """The requested device (`auto` only when no profile was named)."""
    profile: Profile | None
    """None: device `auto` with no profile named; chosen once the device is known."""
    env: dict[str, str | None]
    """Kernel variables to force before torch initialises (None: unset)."""


def plan(
    device: str,
    requested: str | None = None,
    document: str | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> Plan:
    """Choose the profile (CLI, else document, else default) without importing torch.

    `recorded`: the flags of a run being replayed (a `native` replay forces them)."""
    named = (requested and requested != "auto") or document
    if device == "auto" and not named:
        # The device decides the default profile; torch must be imported to resolve it,
        # so pin the CPU default first (harmless for a CUDA run: CPU kernels only).
        default = numerics.PROFILES[numerics.default_profile("cpu")]
        env: dict[str, str | None] = {}
        if numerics.cannot_run(default) is None:
            env.update(default.pins)
        return Plan(device, None, env)
    profile = numerics.choose(requested, document, _device_for(device, requested, document))
    if device == "auto":
        device = "cuda" if profile.device == "cuda" else profile.device
    return Plan(device, profile, numerics.target_environment(profile, recorded))


def _device_for(device: str, requested: str | None, document: str | None) -> str:
    if device != "auto":
        return device
    name = requested if requested and requested != "auto" else document
    profile = numerics.PROFILES.get(name or "")
    return profile.device if profile is not None else "cpu"


def select_device(requested: str) -> str:
    import torch

    if requested == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if requested.startswith("cuda"):
        problem = numerics.cuda_problem()
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
                "driver": numerics.nvidia_driver(),
                "cuda_version": torch.version.cuda,
                "rocm_version": hip,
                **numerics.diagnosis(),
            },
        )
    if device == "mps":
        return HardwareInfo(tier="mps", device="mps", details={"machine": platform.machine()})
    return HardwareInfo(
        tier="cpu", device="cpu", details={"threads": threads, **numerics.diagnosis()}
    )


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
        return numerics.cuda_flags_record(profile)
    flags = numerics.cpu_flags_record(profile, threads)
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
    numerics.activate(run.env)
    dev = select_device(run.device)
    profile = run.profile or numerics.choose(None, None, dev)
    apply_determinism(seed, dev, n)
    hw = detect_hardware(dev, n)
    flags = determinism_flags(profile, hw, n)
    return Environment(dev, profile, hw, flags, numerics.determinism_class(flags, hw.tier))
