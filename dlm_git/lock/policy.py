"""The lock drift policy: one table, used by `train` and by the git hooks.

Invariant: this is the only implementation of the ERROR/WARN/ALLOW table. It works on the
lock's plain JSON form (dicts), so the pre-commit hook can use it without importing
pydantic, torch or anything heavy.

| field                                               | severity                          |
|-----------------------------------------------------|-----------------------------------|
| dlm_sha256                                          | ALLOW (editing the doc is normal) |
| dlm_id, base_model, base_model_revision,            | ERROR                             |
|   base_model_sha256, lock_version, val_fraction     |                                   |
| pinned_versions.torch                               | ERROR on major, else WARN         |
| other pinned_versions (transformers, peft, ...)     | WARN                              |
| hardware_tier, determinism_class, determinism_flags,| WARN                              |
|   seed, cuda_version, rocm_version,                 |                                   |
|   license_acceptance                                |                                   |
| supersedes                                          | not compared                      |

Strict mode (`train --strict-lock`) turns every WARN into ERROR by the one rule,
`dlm_git.severity.Severity.strict`, applied by the drift decision (`lock.decision.judge`),
not here: the table classifies only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

DriftSeverity = Literal["ALLOW", "WARN", "ERROR"]
"""A drift's class in the table (ALLOW: an expected change, reported, never a finding)."""

ERROR_FIELDS = (
    "lock_version",
    "dlm_id",
    "base_model",
    "base_model_revision",
    "base_model_sha256",
    "val_fraction",
)
WARN_FIELDS = (
    "hardware_tier",
    "determinism_class",
    "determinism_flags",
    "seed",
    "cuda_version",
    "rocm_version",
    "license_acceptance",
)
ALLOW_FIELDS = ("dlm_sha256",)
NOT_COMPARED = ("supersedes",)


@dataclass(frozen=True)
class Finding:
    field: str
    severity: DriftSeverity
    old: Any
    new: Any

    def describe(self) -> str:
        """What changed, in full: two mappings as each key that differs (a world-size
        change reads `...distributed.world_size changed: 2 -> 4`), anything else as both
        values. The caller prints it through `output` (escaped)."""
        old, new = self.old, self.new
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            keys = sorted(set(old) | set(new), key=str)
            return "; ".join(
                Finding(f"{self.field}.{k}", self.severity, old.get(k), new.get(k)).describe()
                for k in keys
                if old.get(k) != new.get(k)
            )
        return f"{self.field} changed: {_shown(old)} -> {_shown(new)}"


MAX_SHOWN_CHARS = 200
"""A string longer than this (only a hostile lock has one) is shown cut, saying so."""


def _shown(value: Any) -> str:
    """`value` written out whole: a mapping key by key, a list item by item; only a
    string over `MAX_SHOWN_CHARS` is cut, with the count of characters left out."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_shown(k)}: {_shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, str) and len(value) > MAX_SHOWN_CHARS:
        left = len(value) - MAX_SHOWN_CHARS
        return f"{value[:MAX_SHOWN_CHARS]!r} (and {left} more characters)"
    return repr(value)


def _major(version: object) -> str | None:
    if version is None:
        return None
    return str(version).split("+")[0].split(".")[0]


def classify(prior: Mapping[str, Any], current: Mapping[str, Any]) -> list[Finding]:
    """Every difference between two locks, with its severity (unknown fields: ERROR)."""
    findings: list[Finding] = []
    keys = sorted(set(prior) | set(current))
    for key in keys:
        if key in NOT_COMPARED:
            continue
        old, new = prior.get(key), current.get(key)
        if key == "pinned_versions" and _mapping_or_none(old) and _mapping_or_none(new):
            findings.extend(_classify_versions(old or {}, new or {}))
            continue
        if old == new:
            continue
        if key in WARN_FIELDS and isinstance(old, Mapping) and isinstance(new, Mapping):
            for sub in sorted(set(old) | set(new)):
                if old.get(sub) != new.get(sub):
                    findings.append(Finding(f"{key}.{sub}", "WARN", old.get(sub), new.get(sub)))
            continue
        if key in ALLOW_FIELDS:
            severity: DriftSeverity = "ALLOW"
        elif key in WARN_FIELDS:
            severity = "WARN"
        else:
            severity = "ERROR"
        findings.append(Finding(key, severity, old, new))
    return findings


def _mapping_or_none(value: object) -> bool:
    return value is None or isinstance(value, Mapping)


def _classify_versions(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for name in sorted(set(map(str, old)) | set(map(str, new))):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        severity: DriftSeverity = "WARN"
        if name == "torch" and _major(a) != _major(b):
            severity = "ERROR"
        findings.append(Finding(f"pinned_versions.{name}", severity, a, b))
    return findings
