"""Numerics profiles: the one place that says which kernels a training run may use.

A profile is a named, recorded set of everything that selects the code path of the
numerical kernels (ATen's CPU capability, MKL's conditional-numerical-reproducibility
branch, oneDNN's instruction set, cuBLAS's workspace, ...). Same inputs + same profile +
same pinned library versions + same thread count = same adapter bytes on every machine
able to run the profile; that is the contract `verify --level replay` checks.

Invariants:
- `PROFILES` is the only table of profiles. The auditor's copy of it decides whether bits
  are expected (`expect_bits`); a lock only names a profile and records its facts.
- Kernel-selecting variables are read by the libraries when they initialise, so they are
  put in `os.environ` *before* torch is imported (`activate`). A process in which torch
  was initialised under other values cannot honour a profile: `can_run_in_process` says
  so and the caller trains in a child process instead.
- `flags` (in `dlm.lock` under `determinism_flags`) hold only facts that change the bits
  under the profile. Facts that do not (the CPU model, the machine's own best ISA under a
  pinned profile) are `diagnosis`: shown by `doctor`, written to the gitignored run
  record, never drift.
- This module imports no torch at module level (the git hooks import it).
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dlm_git.errors import DlmGitError, UsageError

Device = Literal["cpu", "cuda", "mps"]
DeterminismClass = Literal["strong", "best-effort", "advisory"]

NATIVE = "native"
X86_64_V3 = "x86-64-v3"
ARMV8_A = "armv8-a"
CUDA = "cuda"
CUBLAS_WORKSPACE = ":4096:8"
# Every variable any profile pins; a profile that does not pin one leaves it as it is.
KERNEL_VARIABLES = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "OPENBLAS_CORETYPE",
    "CUBLAS_WORKSPACE_CONFIG",
)
# Recorded flag for each pinned variable (except ATen's, recorded as what ATen reports).
FLAG_OF_VARIABLE = {
    "MKL_CBWR": "mkl_cbwr",
    "ONEDNN_MAX_CPU_ISA": "onednn_max_cpu_isa",
    "OPENBLAS_CORETYPE": "openblas_coretype",
    "CUBLAS_WORKSPACE_CONFIG": "cublas_workspace_config",
}
# x86-64-v3 (the psABI level): AVX, AVX2, BMI1/2, F16C, FMA, LZCNT (`abm`), MOVBE.
X86_64_V3_CPU_FLAGS = frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"})
CPUINFO = "/proc/cpuinfo"
# CUDA tiers (`cuda-sm80+`, ...) whose bit-exactness under the full deterministic set was
# measured by the golden test on real hardware (docs/determinism.md).
CUDA_STRONG_TIERS: frozenset[str] = frozenset()


class NumericsError(DlmGitError):
    """A profile that does not exist, or that this machine cannot run."""


@dataclass(frozen=True)
class Profile:
    name: str
    device: Device
    summary: str
    arch: str | None = None
    """`platform.machine()` the profile needs (None: any)."""
    pins: Mapping[str, str] = field(default_factory=dict)
    """Variables forced before torch initialises."""
    aten_capability: str | None = None
    """What ATen must report under the pins (checked after torch is imported)."""
    cpu_flags: frozenset[str] = frozenset()
    """`/proc/cpuinfo` flags the pins need."""
    portable: bool = False
    """Bits are the same on every machine able to run the profile."""
    measured: bool = False
    """The golden test has shown the profile bit-exact (needed for class `strong`)."""


PROFILES: dict[str, Profile] = {
    X86_64_V3: Profile(
        name=X86_64_V3,
        device="cpu",
        summary="portable x86-64 CPU kernels: AVX2 for ATen, MKL and oneDNN on any AVX2 CPU",
        arch="x86_64",
        pins={
            "ATEN_CPU_CAPABILITY": "avx2",
            "MKL_CBWR": "AVX2,STRICT",
            "ONEDNN_MAX_CPU_ISA": "AVX2",
        },
        aten_capability="AVX2",
        cpu_flags=X86_64_V3_CPU_FLAGS,
        portable=True,
        measured=True,
    ),
    ARMV8_A: Profile(
        name=ARMV8_A,
        device="cpu",
        summary="portable aarch64 CPU kernels: baseline NEON for ATen, oneDNN and OpenBLAS"
        " (not yet measured: best-effort)",
        arch="aarch64",
        pins={
            "ATEN_CPU_CAPABILITY": "default",
            "ONEDNN_MAX_CPU_ISA": "ADVANCED_SIMD",
            "OPENBLAS_CORETYPE": "ARMV8",
        },
        aten_capability="DEFAULT",
        portable=True,
        measured=False,
    ),
    NATIVE: Profile(
        name=NATIVE,
        device="cpu",
        summary="this machine's best CPU kernels: bit-exact only on the same CPU code path"
        " (same ATen capability, CPU vendor and ISA level)",
        measured=True,
    ),
    CUDA: Profile(
        name=CUDA,
        device="cuda",
        summary="CUDA with the full deterministic set (deterministic algorithms, cuBLAS"
        " workspace, no TF32, no cuDNN benchmark); bits promised only on a measured tier",
        pins={"CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE},
    ),
}


# --------------------------------------------------------------------------- choosing


def default_profile(device: str) -> str:
    """The profile a run gets when nobody names one."""
    if device.startswith("cuda"):
        return CUDA
    if device == "mps":
        return NATIVE
    machine = _machine()
    if machine == "x86_64":
        return X86_64_V3
    if machine == "aarch64":
        return ARMV8_A
    return NATIVE


def profile_named(name: str, subject: str = "--numerics") -> Profile:
    profile = PROFILES.get(name)
    if profile is None:
        raise UsageError(
            subject, f"unknown numerics profile '{name}'", f"use one of {', '.join(PROFILES)}"
        )
    return profile


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


# --------------------------------------------------------------------------- this machine


def _machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


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
    return vendor or "unknown", model or platform.processor() or _machine(), flags


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
    if profile.arch is not None and _machine() != profile.arch:
        return f"needs an {profile.arch} CPU; this machine is {_machine()}"
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
        "machine": _machine(),
    }


# --------------------------------------------------------------------------- the environment


KERNEL_SETTING = re.compile(r"[A-Za-z0-9_.,:]{1,32}")
"""What a recorded kernel setting may look like (`AVX2`, `AVX2,STRICT`, `:4096:8`, ...)."""


# Every key a dlm-git writes (or once wrote: `interop_threads`) into `determinism_flags`
# besides the topology's `distributed`, with the kind of its value. A key that is not
# here makes a lock malformed (`dlm_git.lock.fields`): no record ever carries one.
FLAG_KINDS: dict[str, str] = {
    "numerics": "name",
    "device": "name",
    "machine": "name",
    "cpu_capability": "name",
    "threads": "count",
    "interop_threads": "count",
    "deterministic_algorithms": "bool",
    "cudnn_deterministic": "bool",
    "cudnn_benchmark": "bool",
    "tf32_matmul": "bool",
    "tf32_cudnn": "bool",
    **{flag: "name?" for flag in FLAG_OF_VARIABLE.values()},
    "cpu_vendor": "text?",
    "cpu_isa": "name?",
    "gpu_name": "text?",
    "gpu_capability": "name?",
    "driver": "name?",
    "cuda_version": "name?",
    "cublas_version": "name?",
    "cudnn_version": "name?",
    "nccl_version": "name?",
}
RECORDED_NAME = re.compile(r"[A-Za-z0-9_.,:+-]{1,64}")
RECORDED_TEXT = re.compile(r"[ -~]{1,120}")  # printable ASCII, one line, bounded


def flag_problem(key: str, value: object) -> str | None:
    """Why `determinism_flags.<key>` = `value` is not something a dlm-git records, or None."""
    kind = FLAG_KINDS.get(key)
    if kind is None:
        return f"determinism_flags.{key!r:.60}: unknown key (no dlm-git records it)"
    if kind.endswith("?") and value is None:
        return None
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "count":
        ok = type(value) is int and 0 <= value <= 1 << 20
    elif kind.startswith("name"):
        ok = isinstance(value, str) and RECORDED_NAME.fullmatch(value) is not None
    else:
        ok = isinstance(value, str) and RECORDED_TEXT.fullmatch(value) is not None
    return None if ok else f"determinism_flags.{key} {value!r:.60} is not a recorded {kind}"


def profile_problem(flags: Mapping[str, Any]) -> str | None:
    """Why recorded flags contradict the profile they name (a pinned setting other than
    the profile's pin, another ATen capability, another device), or None. An unknown
    profile is not a contradiction: `replay.profile` says this dlm-git does not know it."""
    profile = PROFILES.get(str(flags.get("numerics")))
    if profile is None:
        return None
    device = flags.get("device")
    if (device == "cuda") != (profile.device == "cuda"):
        return f"determinism_flags.device {device!r} contradicts profile {profile.name}"
    for variable, pinned in profile.pins.items():
        flag = FLAG_OF_VARIABLE.get(variable)
        if flag is not None and flag in flags and flags[flag] != pinned:
            return (
                f"determinism_flags.{flag} {flags[flag]!r} contradicts profile {profile.name}"
                f" (it pins {pinned})"
            )
    capability = flags.get("cpu_capability")
    if profile.aten_capability is not None and capability not in (None, profile.aten_capability):
        return (
            f"determinism_flags.cpu_capability {capability!r} contradicts profile"
            f" {profile.name} (ATen {profile.aten_capability})"
        )
    return None


def malformed_setting(recorded: Mapping[str, Any]) -> str | None:
    """The first recorded kernel setting a replay would put in its environment that is
    not a plain setting (a NUL byte, a newline, a megabyte of text...), or None."""
    for flag in ("cpu_capability", *FLAG_OF_VARIABLE.values()):
        value = recorded.get(flag)
        if value is not None and not (isinstance(value, str) and KERNEL_SETTING.fullmatch(value)):
            return f"determinism_flags.{flag} {value!r:.60} is not a kernel setting"
    return None


def target_environment(
    profile: Profile, recorded: Mapping[str, Any] | None
) -> dict[str, str | None]:
    """The variables a run under `profile` forces (None: must be unset). A replay of a
    `native` run forces what the run recorded (ATen capability, MKL and oneDNN settings,
    unset where the run had them unset), so that the same CPU code path is taken wherever
    this machine can take it. A record from a commit is checked by `malformed_setting`
    first."""
    if profile.name != NATIVE or recorded is None:
        return dict(profile.pins)
    env: dict[str, str | None] = {}
    capability = recorded.get("cpu_capability")
    if isinstance(capability, str) and capability:
        env["ATEN_CPU_CAPABILITY"] = capability.lower()
    for variable, flag in FLAG_OF_VARIABLE.items():
        if flag in recorded:
            value = recorded.get(flag)
            env[variable] = value if isinstance(value, str) and value else None
    return env


def apply_to(environ: dict[str, str], env: Mapping[str, str | None]) -> dict[str, str]:
    """`environ` with `env` forced (None removes a variable): a child's environment."""
    out = dict(environ)
    for key, value in env.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


# The kernel variables as they were when torch was first imported under `activate`
# (None: torch was imported by someone else, or not yet).
_INITIALISED_WITH: dict[str, str | None] | None = None


def _torch_loaded() -> bool:
    return "torch" in sys.modules


def can_run_in_process(env: Mapping[str, str | None]) -> bool:
    """True if training in this process would honour `env`: torch is not initialised
    yet, or it was initialised (after `activate`) under exactly these values."""
    if not _torch_loaded():
        return True
    if _INITIALISED_WITH is None:
        return False
    return all(_INITIALISED_WITH.get(k) == v for k, v in env.items())


def activate(env: Mapping[str, str | None]) -> None:
    """Force `env` in this process before torch initialises (no-op when already so)."""
    global _INITIALISED_WITH
    if not can_run_in_process(env):
        raise NumericsError(
            "numerics",
            "torch is already initialised under other kernel settings in this process",
            "run the training in a fresh process",
        )
    if _torch_loaded():
        return
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _INITIALISED_WITH = {k: os.environ.get(k) for k in KERNEL_VARIABLES}


def initialised_with() -> dict[str, str | None]:
    """The kernel variables torch was initialised under (best knowledge)."""
    if _INITIALISED_WITH is not None:
        return dict(_INITIALISED_WITH)
    return {k: os.environ.get(k) for k in KERNEL_VARIABLES}


# --------------------------------------------------------------------------- recording


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
        "machine": _machine(),
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
    if _machine() == "aarch64":
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
        "cublas_version": _cublas_version(),
        "cudnn_version": _cudnn_version(),
        "nccl_version": _nccl_version(),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
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


def _cublas_version() -> str | None:
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


def _cudnn_version() -> str | None:
    try:
        import torch

        version = torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001
        return None
    return str(version) if version is not None else None


def _nccl_version() -> str | None:
    try:
        import torch

        version = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001
        return None
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)


def determinism_class(flags: Mapping[str, Any], tier: str) -> DeterminismClass:
    """What this dlm-git promises for a run with `flags` (never read from a lock)."""
    if not flags.get("deterministic_algorithms"):
        return "advisory"
    profile = PROFILES.get(str(flags.get("numerics")))
    if profile is None:
        return "advisory"
    if profile.device == "cuda":
        full = (
            flags.get("cublas_workspace_config") == CUBLAS_WORKSPACE
            and flags.get("cudnn_deterministic")
            and not flags.get("cudnn_benchmark")
            and not flags.get("tf32_matmul")
            and not flags.get("tf32_cudnn")
        )
        if not full:
            return "advisory"
        return "strong" if tier in CUDA_STRONG_TIERS else "best-effort"
    if flags.get("device") == "mps":
        return "best-effort"
    if not isinstance(flags.get("threads"), int):
        return "advisory"
    return "strong" if profile.measured else "best-effort"


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Expectation:
    """Whether a replay here is expected to reproduce the recorded bits, and why; when not
    because the replay's environment differs from the record, what differs."""

    bits: bool
    reason: str
    differs: tuple[str, ...] = ()
    """`name recorded -> replayed` for each kernel fact or library version that differs."""


def expect_bits(
    recorded: Mapping[str, Any],
    replayed: Mapping[str, Any],
    recorded_versions: Mapping[str, Any],
    replayed_versions: Mapping[str, Any],
    tier: str,
) -> Expectation:
    """Decided by this dlm-git's profile table applied to the facts the replay itself
    observed (`replayed`, its versions and hardware `tier`): the promise is the table's,
    never the lock's. The record only says where the original ran; a record whose flags
    or versions differ from the replay's names another environment (`differs`), in which
    no bits are expected. Records are validated first (`dlm_git.lock.fields`): no key a
    dlm-git does not write can reach this comparison."""
    name = replayed.get("numerics")
    klass = determinism_class(replayed, tier)
    if klass != "strong":
        return Expectation(False, f"profile {name} promises no bits here (class {klass})")
    differs = tuple(
        f"{k} {recorded.get(k)!r} -> {replayed.get(k)!r}"
        for k in sorted(set(recorded) | set(replayed), key=str)
        if recorded.get(k) != replayed.get(k)
    ) + tuple(
        f"{k} {recorded_versions.get(k)} -> {replayed_versions.get(k)}"
        for k in sorted(set(recorded_versions) | set(replayed_versions), key=str)
        if recorded_versions.get(k) != replayed_versions.get(k)
    )
    if differs:
        shown = ", ".join(differs[:4]) + (", ..." if len(differs) > 4 else "")
        return Expectation(False, f"the replay ran in another environment: {shown}", differs)
    return Expectation(True, f"profile {name}, same kernel facts and versions: bits expected")


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
