"""What only a commit being made is judged by: the staged records against HEAD's
(`lock.drift`, `determinism`).

Invariants:
- Drift is classified by the one lock table (`lock.policy`, through `lock.decision.judge`)
  and accepted only by a `supersedes` that is the sha256 of HEAD's exact lock bytes; each
  drift is a check with the table's own severity. Strict mode is not applied here: the
  hook applies its one rule (`Severity.strict`) once, to every finding.
- `determinism` compares HEAD's inputs (document, sources root, config, base) with the
  staged ones; with the same inputs and another adapter, the numerical setup (the lock's
  `SETUP_FIELDS`) decides: unchanged and a profile that promises bits (class `strong` by
  this dlm-git's profile table, not the lock's claim) is an ERROR, anything else a WARN
  naming every change. HEAD's records that do not parse are not compared.
"""

from __future__ import annotations

from typing import Any

from dlm_git.contract.outcome import Check, Outcome
from dlm_git.contract.shapes import parse_manifest
from dlm_git.errors import DlmGitError
from dlm_git.hashing import sha256_bytes
from dlm_git.lock.decision import judge
from dlm_git.lock.fields import SETUP_FIELDS
from dlm_git.lock.io import parse_lock_json
from dlm_git.safeparse import dig
from dlm_git.severity import Severity

WARN_DRIFT_FIX = "allowed; set DLM_GIT_STRICT=1 to refuse"
SETUP_FIX = (
    "expected when the numerics setup changes; keep one profile per document"
    " (training.numerics, --numerics) to keep one adapter; see docs/determinism.md"
)


def head_lock(data: bytes | None) -> dict[str, Any] | None:
    """HEAD's lock as plain JSON (None: none, or one that does not parse: not compared)."""
    if data is None:
        return None
    try:
        return parse_lock_json(data, "HEAD:dlm.lock")
    except DlmGitError:
        return None


def head_manifest(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        return parse_manifest(data, "HEAD:manifest.json")
    except DlmGitError:
        return None


def lock_drift(lock: dict[str, Any], head: dict[str, Any], head_bytes: bytes) -> list[Check]:
    """Every drift of the staged `lock` from HEAD's, at its table severity."""
    decision = judge(head, lock, prior_sha256=sha256_bytes(head_bytes))
    out = [
        Check("lock.drift", Outcome.FAILED, f.describe(), Severity.ERROR) for f in decision.errors
    ]
    out += [
        Check("lock.drift", Outcome.FAILED, f.describe(), Severity.WARN, WARN_DRIFT_FIX)
        for f in decision.warnings
    ]
    return out


INPUTS = (
    ("dlm_sha256",),
    ("sources", "merkle_root"),
    ("config_sha256",),
    ("base", "tensor_root"),
    ("base", "config_sha256"),
)
"""What an adapter is trained from, as a manifest records it."""


def determinism(
    manifest: dict[str, Any],
    lock: dict[str, Any],
    head_record: dict[str, Any],
    head: dict[str, Any],
) -> Check | None:
    """HEAD's inputs but another adapter, judged by the setup (None: nothing to say)."""
    if any(dig(head_record, *keys) != dig(manifest, *keys) for keys in INPUTS):
        return None
    old, new = dig(head_record, "adapter", "tensor_root"), dig(manifest, "adapter", "tensor_root")
    if old == new:
        return None
    moved = f"same inputs as HEAD but a different adapter ({str(old)[:16]} -> {str(new)[:16]})"
    causes = setup_changes(head, lock)
    if causes:
        what = f"{moved}, explained by a different setup: {'; '.join(causes)}"
        return Check("determinism", Outcome.FAILED, what, Severity.WARN, SETUP_FIX)
    from dlm_git.numerics.judge import determinism_class

    flags = lock["determinism_flags"]
    klass = determinism_class(flags, str(lock.get("hardware_tier")))
    profile = flags.get("numerics", "none recorded")
    what = (
        f"{moved} under the same numerics setup (profile {profile}, class {klass}):"
        " the training was not reproducible"
    )
    severity = Severity.ERROR if klass == "strong" else Severity.WARN
    return Check("determinism", Outcome.FAILED, what, severity)


def setup_changes(prior: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between two locks' numerical setups (`SETUP_FIELDS`)."""
    out: list[str] = []
    for key in SETUP_FIELDS:
        before, after = prior.get(key), current.get(key)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):
            out += [
                f"{key}.{k} {before.get(k)!r} -> {after.get(k)!r}"
                for k in sorted(set(before) | set(after))
                if before.get(k) != after.get(k)
            ]
        else:
            out.append(f"{key} {before!r} -> {after!r}")
    return out
