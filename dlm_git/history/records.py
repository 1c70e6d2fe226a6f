"""Records as a history command reads them: plain JSON, whatever a commit holds.

Invariant: nothing here raises for malformed bytes; a record that is not a JSON object,
or lacks what is asked, reads as None (the caller says so)."""

from __future__ import annotations

import json
import math
from typing import Any

from dlm_git.manifest.records import ADAPTER_WEIGHTS


def json_object(data: bytes | None) -> dict[str, Any] | None:
    """A JSON object as strict JSON reads it: NaN, Infinity and numbers that overflow to
    infinity are not JSON (and could not be written back out), so such a record is None."""
    if data is None:
        return None
    try:
        parsed = json.loads(data, parse_constant=_refuse, parse_float=_finite_float)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _refuse(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows")
    return value


def recorded_adapter_sha(manifest: dict[str, Any] | None) -> str | None:
    """The adapter weights' sha256 a manifest records."""
    try:
        sha = manifest["adapter"]["files"][ADAPTER_WEIGHTS]["sha256"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return sha if isinstance(sha, str) else None
