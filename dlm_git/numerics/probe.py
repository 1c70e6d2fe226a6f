"""This machine: its architecture, CPU, GPU libraries, and which profiles it can run.

Invariants:
- Facts are read from the OS (`/proc/cpuinfo`, `sysctl`, the NVIDIA driver) or from the
  libraries torch loaded; nothing here sets anything.
- `cannot_run`, `isa_level`, `cpu_info` and `diagnosis` need no torch. What does import
  torch (`cuda_problem`, `describe` of a CUDA profile, the library versions) does so
  inside the function, never at module level.
- What a probe cannot learn is "unknown" (None, an empty flag set), never a guess.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from dlm_git.numerics.table import X86_64_V3_CPU_FLAGS, Profile

CPUINFO = "/proc/cpuinfo"


def machine() -> str:
    """This machine's architecture as the profiles name it (`x86_64`, `aarch64`, ...)."""
    arch = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def cpu_info() -> tuple[str, str, frozenset[str]]:
    """(vendor, model name, feature flags) of this CPU, as far as the OS tells."""
    vendor, model, flags = "", "", frozenset[str]()
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key == "model name" and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = frozenset(value.split())
                if vendor and model and flags:
                    break
    except OSError:
        pass
    if not flags and sys.platform == "darwin":
        flags = _darwin_flags()
    return vendor or "unknown", model or platform.processor() or machine(), flags


def _darwin_flags() -> frozenset[str]:
    import subprocess

    names = ("machdep.cpu.features", "machdep.cpu.leaf7_features", "machdep.cpu.extfeatures")
    try:
        out = subprocess.run(
            ["sysctl", "-n", *names], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    words = {w.lower().replace(".", "_") for w in out.split()}
    aliases = {"avx2_0": "avx2", "avx1_0": "avx", "lzcnt": "abm"}
    return frozenset(aliases.get(w, w) for w in words)


def isa_level(flags: frozenset[str]) -> str:
    """The best instruction-set level this CPU offers (diagnosis; part of `native`)."""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512"
    if X86_64_V3_CPU_FLAGS.issubset(flags):
        return "avx2"
    if "sse4_2" in flags:
        return "sse4.2"
    if "sve" in flags:
        return "sve"
    if "asimd" in flags:
        return "neon"
    return "baseline"


def cannot_run(profile: Profile) -> str | None:
    """Why this machine cannot run `profile` (None: it can). Needs no torch."""
    if profile.arch is not None and machine() != profile.arch:
        return f"needs an {profile.arch} CPU; this machine is {machine()}"
    if profile.cpu_flags:
        _, _, flags = cpu_info()
        if not flags:
            return "cannot read this CPU's feature flags to check for " + ", ".join(
                sorted(profile.cpu_flags)
            )
        missing = sorted(profile.cpu_flags - flags)
        if missing:
            return f"this CPU lacks {', '.join(missing)}"
    return None


def diagnosis() -> dict[str, Any]:
    """Facts about this machine that do not change bits under a pinned profile."""
    vendor, model, flags = cpu_info()
    return {
        "cpu_vendor": vendor,
        "cpu_model": model,
        "cpu_isa": isa_level(flags),
        "machine": machine(),
    }


def cuda_problem() -> str | None:
    """Why CUDA cannot be used here (imports torch), or None."""
    import torch

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) has no CUDA support"
    if not torch.cuda.is_available():
        return "no CUDA device is visible"
    return None


def describe(profile: Profile) -> dict[str, Any]:
    """What `doctor` shows about a profile on this machine (imports torch for CUDA)."""
    problem = cannot_run(profile)
    if problem is None and profile.device == "cuda":
        problem = cuda_problem()
    return {
        "name": profile.name,
        "summary": profile.summary,
        "device": profile.device,
        "arch": profile.arch,
        "pins": dict(profile.pins),
        "portable": profile.portable,
        "measured": profile.measured,
        "runnable_here": problem is None,
        "why_not": problem,
    }


def nvidia_driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            first = fh.readline()
    except OSError:
        first = ""
    for token in first.split():
        if token.count(".") >= 1 and token.replace(".", "").isdigit():
            return token
    try:
        import pynvml

        pynvml.nvmlInit()
        return str(pynvml.nvmlSystemGetDriverVersion())
    except Exception:  # noqa: BLE001 - optional: any failure means "unknown"
        return None


def cublas_version() -> str | None:
    """cuBLAS's version as `major.minor.patch` (the library torch loaded), or None."""
    from ctypes import CDLL, byref, c_int

    for soname in ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11"):
        try:
            cublas = CDLL(soname)
        except OSError:
            continue
        parts = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = c_int()
            if cublas.cublasGetProperty(prop, byref(value)) != 0:
                return None
            parts.append(str(value.value))
        return ".".join(parts)
    return None


def cudnn_version() -> str | None:
    try:
        import torch

        version = torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001
        return None
    return str(version) if version is not None else None


def nccl_version() -> str | None:
    try:
        import torch

        version = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001
        return None
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
