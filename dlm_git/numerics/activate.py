"""The kernel-selecting environment of a run, forced before torch initialises.

Invariants:
- Kernel-selecting variables are read by the libraries when they initialise, so they are
  put in `os.environ` *before* torch is imported (`activate`). A process in which torch
  was initialised under other values cannot honour a profile: `can_run_in_process` says
  so and the caller trains in a child process instead (`apply_to` builds its
  environment).
- A replay of a `native` run forces what the run recorded (`target_environment`); a
  record from a commit is checked by `flags.malformed_setting` first.
- Imports no torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from dlm_git.numerics.table import (
    FLAG_OF_VARIABLE,
    KERNEL_VARIABLES,
    NATIVE,
    NumericsError,
    Profile,
)


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
