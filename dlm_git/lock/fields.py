"""The shape of every field a `dlm.lock` may hold, below the top-level schema.

Invariant: a lock holds only what a dlm-git writes. An unknown key anywhere in it (in
`determinism_flags`, in its `distributed` record, in `pinned_versions`) or a value of the
wrong kind is a malformed record: every reader refuses it through `parse_lock_json`, so a
hook refuses it at commit time and verify fails it (`lock.parse`) and launches nothing.
A commit therefore cannot add a flag or a package that makes two runs look different to
`numerics.judge.expect_bits`. No pydantic and no torch here: the git hooks use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from dlm_git import topology
from dlm_git.numerics.flags import flag_problem, profile_problem
from dlm_git.versions import RECORDED_PACKAGES

VERSION_TEXT = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")
STR, OPT_STR, INT, OBJECT = "a string", "a string or null", "an integer", "an object"
FRACTION = "a number between 0 and 1 (exclusive)"
CLASSES = ("strong", "best-effort", "advisory")
TOP_FIELDS: dict[str, str] = {
    "lock_version": INT,
    "dlm_id": STR,
    "dlm_sha256": STR,
    "base_model": STR,
    "base_model_revision": OPT_STR,
    "base_model_sha256": STR,
    "pinned_versions": OBJECT,
    "cuda_version": OPT_STR,
    "rocm_version": OPT_STR,
    "hardware_tier": STR,
    "seed": INT,
    "determinism_flags": OBJECT,
    "determinism_class": STR,
    "license_acceptance": OBJECT,
    "supersedes": OPT_STR,
    "val_fraction": FRACTION,
}
"""Every top-level field of a lock and its kind (`dlm_git.lock.schema.Lock`'s fields; a
test keeps them equal). All are required but `supersedes`, `val_fraction` (the held-out
split, written only when set) and `lock_version` (which `parse_lock_json` checks first)."""
LOCK_KEYS = frozenset(TOP_FIELDS)
OPTIONAL_KEYS = frozenset({"lock_version", "supersedes", "val_fraction"})
SETUP_FIELDS = (
    "pinned_versions",
    "hardware_tier",
    "determinism_flags",
    "seed",
    "cuda_version",
    "rocm_version",
)
"""The fields that record the numerical setup a run trained under (versions, hardware,
flags and profile, seed, GPU stacks): two runs of the same inputs under the same setup
are expected to give the same adapter when the profile promises bits."""
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
            problem = flag_problem(str(key), value)
        if problem is not None:
            return problem
    return profile_problem(flags)


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
    problem = next(
        (p for key, kind in TOP_FIELDS.items() if (p := _field_problem(obj, key, kind))), None
    )
    if problem is not None:
        return problem
    if obj["determinism_class"] not in CLASSES:
        return (
            f"determinism_class {obj['determinism_class']!r:.60} is not one of {', '.join(CLASSES)}"
        )
    return (
        license_problem(obj["license_acceptance"])
        or flags_problem(obj.get("determinism_flags"))
        or versions_problem(obj.get("pinned_versions"))
    )


def _field_problem(obj: Mapping[str, object], key: str, kind: str) -> str | None:
    if key not in obj:
        return None if key in OPTIONAL_KEYS else f"{key}: missing"
    value = obj[key]
    if kind == INT:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == OBJECT:
        ok = isinstance(value, Mapping)
    elif kind == FRACTION:  # never a bool, and never 0, 1, inf or nan
        ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1
    else:
        ok = isinstance(value, str) or (kind == OPT_STR and value is None)
    return None if ok else f"{key} {value!r:.60} is not {kind}"


def license_problem(record: object) -> str | None:
    """Why `license_acceptance` is not a record a dlm-git writes, or None."""
    assert isinstance(record, Mapping)
    extra = sorted(str(k) for k in record if k not in LICENSE_KEYS)
    if extra:
        return f"license_acceptance.{extra[0]!r:.60}: unknown key"
    for key, kind in (("license", str), ("requires_acceptance", bool), ("accepted", bool)):
        if not isinstance(record.get(key), kind):
            return f"license_acceptance.{key} {record.get(key)!r:.60} is not a {kind.__name__}"
    return None
