"""The verdicts this machine's `dlm-git verify COMMIT` reached: the auditor's own memory.

Invariants:
- Machine-local: `verdicts.json` in the work tree's state directory inside the git
  directory (`dlm_git.statedir`), so verifying writes nothing into the work tree; never
  committed and never read from a commit (what a commit says about itself is its
  `verify.json`, which `dlm-git log` shows apart).
- One entry per (commit, document): the last verdict reached, its level, when (UTC
  seconds) and the verifier that reached it (`dlm_git.selfid`: version, digest, commit).
  Written atomically; a damaged or foreign file is ignored and replaced. An entry
  written by a dlm-git that recorded no verifier, or holding one of another shape, is
  kept with `verifier` None: unknown, never guessed.
- Bounded: the MAX_COMMITS most recently verified commits are kept.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import MAX_RECORD_BYTES, atomic_write_bytes, read_regular
from dlm_git.hashing import canonical_json
from dlm_git.safeparse import load_json
from dlm_git.selfid import Identity, from_json
from dlm_git.statedir import state_path
from dlm_git.verify.report import DocReport

STORE = "verdicts.json"
MAX_COMMITS = 10_000


def known(root: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """commit -> document -> {"verdict", "level", "at", "verifier"} (empty when none or
    damaged; `verifier` an identity's JSON, or None where unknown)."""
    try:
        data = load_json(read_regular(_path(root), MAX_RECORD_BYTES, follow_symlinks=False))
    except (OSError, ValueError, DlmGitError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        sha: {doc: _entry(entry) for doc, entry in docs.items() if _entry_ok(entry)}
        for sha, docs in data.items()
        if isinstance(sha, str) and isinstance(docs, dict)
    }


def remember(root: Path, sha: str, reports: Iterable[DocReport], verifier: Identity) -> None:
    """Record each report's verdict for `sha`, reached by `verifier` (best effort: a
    read-only disk is no error)."""
    store = known(root)
    now = int(time.time())
    docs = store.pop(sha, {})
    by = verifier.to_json()
    for r in reports:
        docs[r.doc] = {"verdict": str(r.verdict), "level": str(r.level), "at": now, "verifier": by}
    store[sha] = docs
    if len(store) > MAX_COMMITS:
        newest = sorted(
            store, key=lambda c: max(e["at"] for e in store[c].values()) if store[c] else 0
        )
        store = {c: store[c] for c in newest[-MAX_COMMITS:]}
    with contextlib.suppress(OSError, DlmGitError):
        # whole or not at all; the rename is not made durable: losing the newest
        # verdict to a power loss loses a memory, never a record
        atomic_write_bytes(_path(root), canonical_json(store), sync_dir=False)


def _path(root: Path) -> Path:
    return state_path(root, STORE)


def _entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A checked entry's fields, its verifier read back as hostile input."""
    verifier = from_json(entry.get("verifier"))
    return {
        "verdict": entry["verdict"],
        "level": entry["level"],
        "at": entry["at"],
        "verifier": None if verifier is None else verifier.to_json(),
    }


def _entry_ok(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("verdict"), str)
        and isinstance(entry.get("level"), str)
        and type(entry.get("at")) is int
    )
