"""Records as a history command reads them: plain JSON, whatever a commit holds.

Invariant: nothing here raises for malformed bytes; a record that is not a JSON object,
or lacks what is asked, reads as None (the caller says so)."""

from __future__ import annotations

import json
from typing import Any

from dlm_git.manifest.records import ADAPTER_WEIGHTS


def json_object(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def recorded_adapter_sha(manifest: dict[str, Any] | None) -> str | None:
    """The adapter weights' sha256 a manifest records."""
    try:
        sha = manifest["adapter"]["files"][ADAPTER_WEIGHTS]["sha256"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return sha if isinstance(sha, str) else None
