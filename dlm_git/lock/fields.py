"""The shape of every field a `dlm.lock` may hold, below the top-level schema.

Invariant: a lock holds only what a dlm-git writes. An unknown key anywhere in it (in
`determinism_flags`, in its `distributed` record, in `pinned_versions`) or a value of the
wrong kind is a malformed record: every reader refuses it through `parse_lock_json`, so a
hook refuses it at commit time and verify fails it (`lock.parse`) and launches nothing.
A commit therefore cannot add a flag or a package that makes two runs look different to
`numerics.expect_bits`. No pydantic and no torch here: the git hooks use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from dlm_git import numerics, topology
from dlm_git.versions import RECORDED_PACKAGES

VERSION_TEXT = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")
LOCK_KEYS = frozenset(
    {
        "lock_version",
        "dlm_id",
        "dlm_sha256",
        "base_model",
        "base_model_revision",
        "base_model_sha256",
        "pinned_versions",
        "cuda_version",
        "rocm_version",
        "hardware_tier",
        "seed",
        "determinism_flags",
        "determinism_class",
        "license_acceptance",
        "supersedes",
    }
)
"""The top-level keys of a lock (`dlm_git.lock.schema.Lock`'s fields; a test keeps them equal)."""
LICENSE_KEYS = frozenset({"license", "requires_acceptance", "accepted"})


def flags_problem(flags: object) -> str | None:
    """Why `determinism_flags` is not a record a dlm-git writes, or None."""
    if not isinstance(flags, Mapping):
        return "determinism_flags is not an object"
    for key in sorted(flags, key=str):
        value = flags[key]
        if key == topology.FLAG:
            problem = topology.record_problem(value)
        else:
            problem = numerics.flag_problem(str(key), value)
        if problem is not None:
            return problem
    return numerics.profile_problem(flags)


def versions_problem(versions: object) -> str | None:
    """Why `pinned_versions` is not a record a dlm-git writes, or None."""
    if not isinstance(versions, Mapping):
        return "pinned_versions is not an object"
    for name in sorted(versions, key=str):
        if name not in RECORDED_PACKAGES:
            return f"pinned_versions.{name!r:.60}: unknown package (no dlm-git records it)"
        value = versions[name]
        if not isinstance(value, str) or VERSION_TEXT.fullmatch(value) is None:
            return f"pinned_versions.{name} {value!r:.60} is not a version"
    if "torch" not in versions:
        return "pinned_versions has no torch version"
    return None


def lock_problem(obj: Mapping[str, object]) -> str | None:
    """The first field of a lock (as plain JSON) that no dlm-git would write, or None."""
    unknown = sorted(str(k) for k in obj if k not in LOCK_KEYS)
    if unknown:
        return f"{unknown[0]!r:.60}: unknown key (no dlm-git records it)"
    license_record = obj.get("license_acceptance")
    if isinstance(license_record, Mapping):
        extra = sorted(str(k) for k in license_record if k not in LICENSE_KEYS)
        if extra:
            return f"license_acceptance.{extra[0]!r:.60}: unknown key"
    return flags_problem(obj.get("determinism_flags")) or versions_problem(
        obj.get("pinned_versions")
    )
