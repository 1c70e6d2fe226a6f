"""The `dlm.lock` schema (version 1).

Invariant: a lock is a pure function of what produced the adapter. It holds no
timestamps, run counters, hostnames or absolute paths, so re-training unchanged inputs on
the same setup rewrites it byte-identically (canonical JSON) and leaves `git status` clean.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from dlm_git.hashing import canonical_json, sha256_bytes


class LicenseAcceptance(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    license: str
    requires_acceptance: bool
    accepted: bool


class Lock(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    lock_version: Literal[1] = 1  # == LOCK_VERSION
    dlm_id: str
    dlm_sha256: str
    base_model: str
    base_model_revision: str | None
    base_model_sha256: str
    pinned_versions: dict[str, str]
    cuda_version: str | None
    rocm_version: str | None
    hardware_tier: str
    seed: int
    determinism_flags: dict[str, Any]
    determinism_class: Literal["strong", "best-effort", "advisory"]
    license_acceptance: LicenseAcceptance
    supersedes: str | None = None

    def to_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return sha256_bytes(self.to_bytes())

    def without_supersedes(self) -> Lock:
        return self.model_copy(update={"supersedes": None})
