"""Determinism settings, hardware tier detection and the determinism class.

Invariants:
- `apply_determinism` is the single place that seeds RNGs and pins the numerical
  environment (threads, deterministic algorithms, cuBLAS workspace, TF32, cuDNN).
- `determinism_flags` records, as plain JSON values, everything about that environment
  that can change the bits of a training run; it is what `dlm.lock` stores and what a
  replay re-applies. No timestamps, no hostnames, no paths.
- Class `strong` is claimed only for setups the golden test has shown to be bit-exact:
  CPU with a pinned thread count (same ATen code path). CUDA is `best-effort` until a
  golden run on CUDA is recorded (see docs/determinism.md); MPS and ROCm are `best-effort`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_THREADS = 2
CUBLAS_WORKSPACE = ":4096:8"
DeterminismClass = Literal["strong", "best-effort", "advisory"]
# CUDA tiers whose bit-exactness under the full deterministic set has been measured by the
# golden test on real hardware. Empty until such a run is recorded in docs/determinism.md.
CUDA_STRONG_TIERS: frozenset[str] = frozenset()


@dataclass(frozen=True)
class HardwareInfo:
    tier: str
    device: str
    details: dict[str, Any]


def default_threads() -> int:
    env = os.environ.get("DLM_GIT_THREADS")
    return int(env) if env else DEFAULT_THREADS


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def select_device(requested: str = "auto") -> str:
    import torch

    if requested != "auto":
        return requested
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def detect_hardware(device: str, threads: int) -> HardwareInfo:
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        major, minor = props.major, props.minor
        if getattr(torch.version, "hip", None):
            tier = "rocm"
        else:
            tier = "cuda-sm80+" if major >= 8 else "cuda-sm<80"
        return HardwareInfo(
            tier=tier,
            device="cuda",
            details={
                "gpu_name": props.name,
                "capability": f"{major}.{minor}",
                "driver": _nvidia_driver(),
                "cuda_version": torch.version.cuda,
                "rocm_version": getattr(torch.version, "hip", None),
            },
        )
    if device == "mps":
        return HardwareInfo(tier="mps", device="mps", details={"machine": platform.machine()})
    return HardwareInfo(
        tier="cpu",
        device="cpu",
        details={
            "threads": threads,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cpu_model": cpu_model(),
            "machine": platform.machine(),
        },
    )


def _nvidia_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
        for token in first.split():
            if token.count(".") >= 1 and token.replace(".", "").isdigit():
                return token
    except OSError:
        pass
    return None


def apply_determinism(seed: int, device: str, threads: int) -> None:
    """Seed every RNG and pin the numerical environment. Call before building the model."""
    if device.startswith("cuda"):
        # Must be in the environment before cuBLAS initialises.
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
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


def determinism_flags(hw: HardwareInfo) -> dict[str, Any]:
    """The recorded numerical environment (after `apply_determinism`)."""
    import torch

    flags: dict[str, Any] = {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "threads": torch.get_num_threads(),
        "device": hw.device,
    }
    if hw.device == "cpu":
        flags["cpu_capability"] = hw.details["cpu_capability"]
        flags["machine"] = hw.details["machine"]
    if hw.device == "cuda":
        flags["cublas_workspace_config"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        flags["cudnn_deterministic"] = bool(torch.backends.cudnn.deterministic)
        flags["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
        flags["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        flags["tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
        flags["gpu_capability"] = hw.details["capability"]
    return flags


@dataclass(frozen=True)
class Environment:
    """What a run on this machine records: device, tier, flags and class."""

    device: str
    hardware: HardwareInfo
    flags: dict[str, Any]
    klass: DeterminismClass


def prepare(seed: int, device: str = "auto", threads: int | None = None) -> Environment:
    """Select the device, seed and pin everything, and describe the result (train, doctor)."""
    dev = select_device(device)
    n = threads or default_threads()
    apply_determinism(seed, dev, n)
    hw = detect_hardware(dev, n)
    flags = determinism_flags(hw)
    return Environment(dev, hw, flags, determinism_class(hw, flags))


def determinism_class(hw: HardwareInfo, flags: dict[str, Any]) -> DeterminismClass:
    if not flags.get("deterministic_algorithms"):
        return "advisory"
    if hw.tier == "cpu":
        return "strong" if isinstance(flags.get("threads"), int) else "advisory"
    if hw.tier.startswith("cuda"):
        full = (
            flags.get("cublas_workspace_config") == CUBLAS_WORKSPACE
            and flags.get("cudnn_deterministic")
            and not flags.get("cudnn_benchmark")
            and not flags.get("tf32_matmul")
            and not flags.get("tf32_cudnn")
        )
        if full and hw.tier in CUDA_STRONG_TIERS:
            return "strong"
        return "best-effort" if full else "advisory"
    if hw.tier in ("mps", "rocm"):
        return "best-effort"
    return "advisory"
