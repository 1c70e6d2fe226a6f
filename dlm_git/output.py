"""Printing for the CLI: JSON to stdout for machines, rich text for people, errors to stderr."""

from __future__ import annotations

import sys
from typing import Any

from dlm_git.hashing import canonical_json


def emit_json(obj: Any) -> None:
    sys.stdout.write(canonical_json(obj).decode("utf-8"))
    sys.stdout.flush()


def error_line(text: str) -> None:
    sys.stderr.write(text.rstrip("\n") + "\n")
    sys.stderr.flush()


def console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)
