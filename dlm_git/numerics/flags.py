"""What `determinism_flags` in a lock may hold, judged value by value.

Invariants:
- `FLAG_KINDS` names every key a dlm-git writes (or once wrote) into `determinism_flags`,
  with the kind of its value: a key that is not there, or a value of another kind, makes
  a lock malformed (`dlm_git.lock.fields`), so no record ever carries one.
- Recorded flags that contradict the profile they name (`profile_problem`) and kernel
  settings a replay would put in its environment that are not plain settings
  (`malformed_setting`) are named, never applied.
- Pure functions of the recorded values and the profile table: no probe, no torch (the
  git hooks use it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dlm_git.numerics.table import FLAG_OF_VARIABLE, PROFILES

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
    "max_steps": "steps",  # `train --max-steps N` (dlm_git.train.smoke)
}
MAX_STEPS = 1 << 20
"""The largest step limit `--max-steps` takes and a lock may record."""


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
    elif kind == "steps":
        ok = type(value) is int and 1 <= value <= MAX_STEPS
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
