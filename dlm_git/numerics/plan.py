"""Choosing a run's profile and thread count, before torch is imported.

Invariants:
- The profile of a run is the command line's, else the document's, else the device's
  default (`choose`); one for another device or architecture, or one this CPU cannot
  run, is refused in one line before anything is imported or trained.
- A `Plan` holds everything that must be forced before torch initialises
  (`activate.activate(plan.env)`); `prepare.prepare` carries it out.
- Imports no torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlm_git.errors import UsageError
from dlm_git.numerics.activate import target_environment
from dlm_git.numerics.probe import cannot_run, machine
from dlm_git.numerics.table import (
    ARMV8_A,
    CUDA,
    NATIVE,
    PROFILES,
    X86_64_V3,
    NumericsError,
    Profile,
    profile_named,
)


def default_profile(device: str) -> str:
    """The profile a run gets when nobody names one."""
    if device.startswith("cuda"):
        return CUDA
    if device == "mps":
        return NATIVE
    arch = machine()
    if arch == "x86_64":
        return X86_64_V3
    if arch == "aarch64":
        return ARMV8_A
    return NATIVE


def choose(requested: str | None, document: str | None, device: str) -> Profile:
    """The profile for a run: the command line's, else the document's, else the default.

    `device` is the requested device (`auto` is resolved by the caller: a CUDA profile
    needs `cuda`). Refuses a profile for another device or architecture, or one this CPU
    cannot run, with a one-line error."""
    if requested and requested != "auto":
        profile = profile_named(requested)
    elif document:
        profile = profile_named(document, "training.numerics")
    else:
        profile = profile_named(default_profile(device))
    wants_cuda = device.startswith("cuda")
    subject = "--numerics" if requested and requested != "auto" else "training.numerics"
    if not (requested and requested != "auto") and not document:
        subject = "--device"
    if profile.device == "cuda" and not wants_cuda:
        raise UsageError(subject, f"profile '{profile.name}' trains on CUDA", "add --device cuda")
    if profile.device == "cpu" and wants_cuda:
        raise UsageError(
            subject,
            f"profile '{profile.name}' is a CPU profile and cannot train on {device}",
            "use --numerics cuda (or auto) with --device cuda",
        )
    problem = cannot_run(profile)
    if problem is not None:
        raise NumericsError(f"numerics profile {profile.name}", problem, _fix(profile))
    return profile


def _fix(profile: Profile) -> str:
    if profile.name == X86_64_V3:
        return "train on an x86-64 CPU with AVX2, or choose --numerics native (not portable)"
    if profile.name == ARMV8_A:
        return "train on an aarch64 CPU, or choose --numerics native (not portable)"
    return "choose another --numerics profile"


DEFAULT_THREADS = 2


MAX_THREADS = 1024


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
        default = PROFILES[default_profile("cpu")]
        env: dict[str, str | None] = {}
        if cannot_run(default) is None:
            env.update(default.pins)
        return Plan(device, None, env)
    profile = choose(requested, document, _device_for(device, requested, document))
    if device == "auto":
        device = "cuda" if profile.device == "cuda" else profile.device
    return Plan(device, profile, target_environment(profile, recorded))


def _device_for(device: str, requested: str | None, document: str | None) -> str:
    if device != "auto":
        return device
    name = requested if requested and requested != "auto" else document
    profile = PROFILES.get(name or "")
    return profile.device if profile is not None else "cpu"
