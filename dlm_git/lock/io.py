"""Read and write `dlm.lock` files (and parse lock bytes read from git objects)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from dlm_git.fsutil import atomic_write_bytes
from dlm_git.lock.errors import LockError
from dlm_git.lock.schema import LOCK_VERSION, Lock

FIX_HINT = "restore it from git (`git checkout -- {path}`) or re-train with --update-lock"


def parse_lock(data: bytes, subject: str) -> Lock:
    hint = FIX_HINT.format(path=subject)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise LockError(subject, f"lock is not valid JSON{where}", hint) from None
    if not isinstance(obj, dict):
        raise LockError(subject, "lock is not a JSON object", hint)
    version = obj.get("lock_version")
    if version != LOCK_VERSION:
        raise LockError(
            subject,
            f"unknown lock_version {version!r} (this dlm-git reads version {LOCK_VERSION})",
            "upgrade dlm-git, or re-train with --update-lock to rewrite the lock",
        )
    try:
        return Lock.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise LockError(subject, f"lock field '{key}': {first['msg']}", hint) from None


def read_lock(path: Path) -> Lock | None:
    """The lock at `path`, or None if there is none. Corrupt locks raise LockError."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return parse_lock(data, str(path))


def write_lock(path: Path, lock: Lock) -> None:
    atomic_write_bytes(path, lock.to_bytes())
