"""What this dlm-git promises for a run, and whether a replay should reproduce its bits.

Invariants:
- The promise is this dlm-git's profile table applied to facts the replay observed
  (`determinism_class`, `expect_bits`), never a class or a promise read from a lock.
- `strong` only for profiles the golden test has shown bit-exact; CUDA stays
  `best-effort` until a tier is measured (docs/determinism.md).
- Pure functions of the table and the given facts: no probe, no torch (the pre-commit
  hook imports this module for `determinism_class`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlm_git.numerics.table import CUBLAS_WORKSPACE, CUDA_STRONG_TIERS, PROFILES, DeterminismClass


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
