"""A light look at a `.dlm`'s frontmatter, for hooks and verification that must stay fast.

Invariant: only `yaml.safe_load` on the frontmatter; no schema validation (callers that
need validated values use `doc.parser`). Anything unreadable gives an empty result.
"""

from __future__ import annotations

import posixpath
from typing import Any

import yaml


def peek_frontmatter(text: bytes) -> dict[str, Any]:
    try:
        lines = text.decode("utf-8").lstrip("\ufeff").replace("\r\n", "\n").split("\n")
        if lines[0] != "---":
            return {}
        end = lines.index("---", 1)
        data = yaml.safe_load("\n".join(lines[1:end]))
    except (UnicodeDecodeError, ValueError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def source_dirs(doc_rel: str, text: bytes) -> list[str]:
    """Repo-relative paths named by `training.sources[*].path` (inside the repo only)."""
    training = peek_frontmatter(text).get("training") or {}
    out = []
    for spec in (training.get("sources") or []) if isinstance(training, dict) else []:
        path = spec.get("path") if isinstance(spec, dict) else None
        if isinstance(path, str):
            joined = posixpath.normpath(posixpath.join(doc_rel, path))
            if not joined.startswith(".."):
                out.append("." if joined == "." else joined)
    return out
