"""Read and write `dlm.lock` files (and parse lock bytes read from git objects).

Invariant: lock bytes are hostile until parsed here, through `safeparse` (nesting
bounded), and checked for version and the shape of their records; a lock that fails is a
`LockError` naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm_git.fsutil import atomic_write_bytes
from dlm_git.lock.errors import LockError
from dlm_git.lock.fields import lock_problem
from dlm_git.safeparse import load_json

if TYPE_CHECKING:
    from dlm_git.lock.schema import Lock

LOCK_VERSION = 1

FIX_HINT = "restore it from git (`git checkout -- {path}`) or re-train with --update-lock"


def parse_lock_json(data: bytes, subject: str) -> dict[str, Any]:
    """The lock as a plain dict, checked for JSON, version and the shape of its records
    (`dlm_git.lock.fields`; no pydantic: hooks)."""
    hint = FIX_HINT.format(path=subject)
    try:
        obj = load_json(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and json.JSONDecodeError are ValueErrors
        raise LockError(subject, f"lock is not valid JSON{_where(exc)}", hint) from None
    if not isinstance(obj, dict):
        raise LockError(subject, "lock is not a JSON object", hint)
    version = obj.get("lock_version")
    if version != LOCK_VERSION:
        raise LockError(
            subject,
            f"unknown lock_version {version!r} (this dlm-git reads version {LOCK_VERSION})",
            "upgrade dlm-git, or re-train with --update-lock to rewrite the lock",
        )
    problem = lock_problem(obj)
    if problem is not None:
        raise LockError(subject, f"malformed lock: {problem}", hint)
    return obj


def _where(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f" (line {exc.lineno})"
    return "" if isinstance(exc, UnicodeDecodeError) else f" ({exc})"


def parse_lock(data: bytes, subject: str) -> Lock:
    """The lock, fully validated against the schema."""
    from dlm_git.lock.schema import Lock
    from dlm_git.validated import ValidationError

    obj = parse_lock_json(data, subject)
    hint = FIX_HINT.format(path=subject)
    try:
        return Lock.model_validate(obj)
    except ValidationError as exc:
        first = exc.problems[0]
        key = ".".join(str(p) for p in first.loc)
        raise LockError(subject, f"lock field '{key}': {first.message}", hint) from None


def read_lock(path: Path) -> Lock | None:
    """The lock at `path`, or None if there is none. Corrupt locks raise LockError."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LockError(
            str(path), f"cannot read the lock ({exc.strerror})", FIX_HINT.format(path=path)
        ) from None
    return parse_lock(data, str(path))


def write_lock(path: Path, lock: Lock) -> None:
    atomic_write_bytes(path, lock.to_bytes())
