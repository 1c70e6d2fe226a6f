"""The `dlm.lock` schema (version 1).

Invariant: a lock is a pure function of what produced the adapter. It holds no
timestamps, run counters, hostnames or absolute paths, so re-training unchanged inputs on
the same setup rewrites it byte-identically (canonical JSON) and leaves `git status` clean.
`val_fraction` (the held-out split, `dlm_git.train.heldout`) is written only when set:
a lock of a document without one has the bytes it always had.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from dlm_git.hashing import canonical_json, sha256_bytes
from dlm_git.validated import Bounds, Finite, Record


class LicenseAcceptance(Record):
    license: str
    requires_acceptance: bool
    accepted: bool


class Lock(Record):
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
    val_fraction: Annotated[float, Finite(), Bounds(gt=0, lt=1)] | None = None

    def _serialized(self, data: dict[str, Any]) -> dict[str, Any]:
        """Without `val_fraction` when it is unset: the bytes of a lock from before it."""
        if self.val_fraction is None:
            data.pop("val_fraction", None)
        return data

    def to_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return sha256_bytes(self.to_bytes())

    def without_supersedes(self) -> Lock:
        return self.model_copy(update={"supersedes": None})
