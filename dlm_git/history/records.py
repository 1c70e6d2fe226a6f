"""Records as a history command reads them: plain JSON, whatever a commit holds.

Invariant: nothing here raises for malformed bytes; a record that is not a JSON object,
or lacks what is asked, reads as None (the caller says so)."""

from __future__ import annotations

from typing import Any

from dlm_git.layout import ADAPTER_WEIGHTS
from dlm_git.safeparse import dig, load_json


def json_object(data: bytes | None) -> dict[str, Any] | None:
    """A JSON object as strict JSON reads it (`safeparse.load_json(finite=True)`: NaN,
    Infinity and overflowing numbers could not be written back out), else None."""
    if data is None:
        return None
    try:
        parsed = load_json(data, finite=True)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def recorded_adapter_sha(manifest: dict[str, Any] | None) -> str | None:
    """The adapter weights' sha256 a manifest records."""
    return dig(manifest, "adapter", "files", ADAPTER_WEIGHTS, "sha256", kind=str)


def recorded_files(manifest: dict[str, Any] | None) -> dict[str, object]:
    """Adapter file name -> the sha256 the manifest records for it, as it is (a value of
    any kind: the caller judges it; None where the file's record is no object or has
    none); {} when the manifest holds no object of file records."""
    files = dig(manifest, "adapter", "files", kind=dict)
    return {name: dig(record, "sha256") for name, record in (files or {}).items()}
