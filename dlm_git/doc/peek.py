"""A light look at a `.dlm`'s frontmatter, for hooks and verification that must stay fast.

Invariant: only a safe YAML load of the frontmatter (libyaml's when available, nesting
bounded first by `dlm_git.safeparse`; cached per document bytes); no schema validation
(callers that need validated values use `doc.parser`). Anything unreadable gives an empty result.
"""

from __future__ import annotations

import copy
import functools
import posixpath
from typing import Any

import yaml

from dlm_git.safeparse import load_yaml

DEFAULT_BASE_MODEL = "builtin:tiny"
"""`base_model` when the frontmatter has none (the schema's default)."""


def peek_base_model(text: bytes) -> str | None:
    """The `base_model` a document trains on, as its frontmatter says it (the default when
    absent); None when the frontmatter cannot be read or the value is not a string."""
    data = _peek(text)
    if not data:
        return None
    value = data.get("base_model", DEFAULT_BASE_MODEL)
    return value if isinstance(value, str) else None


def peek_frontmatter(text: bytes) -> dict[str, Any]:
    # A copy: the parse is cached (the hooks peek at the same bytes several times).
    return copy.deepcopy(_peek(text))


@functools.lru_cache(maxsize=256)
def _peek(text: bytes) -> dict[str, Any]:
    try:
        decoded = text.decode("utf-8")
        decoded = decoded[1:] if decoded.startswith("\ufeff") else decoded
        # line breaks as the parser has them (doc.parser.normalize_text): CRLF and lone CR
        lines = decoded.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if lines[0] != "---":
            return {}
        end = lines.index("---", 1)
        data = load_yaml("\n".join(lines[1:end]))
    except (UnicodeDecodeError, ValueError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _source_paths(doc_rel: str, text: bytes) -> tuple[list[str], list[str]]:
    """`training.sources[*].path`, joined to the document's directory: (inside the
    repository as repo-relative paths, outside it as written in the document)."""
    training = _peek(text).get("training") or {}
    inside, outside = [], []
    for spec in (training.get("sources") or []) if isinstance(training, dict) else []:
        path = spec.get("path") if isinstance(spec, dict) else None
        if isinstance(path, str):
            joined = posixpath.normpath(posixpath.join(doc_rel, path))
            if joined == ".." or joined.startswith("../") or posixpath.isabs(joined):
                outside.append(path)
            else:
                inside.append(joined)
    return inside, outside


def source_dirs(doc_rel: str, text: bytes) -> list[str]:
    """Repo-relative paths named by `training.sources[*].path` (inside the repo only)."""
    return _source_paths(doc_rel, text)[0]


def outside_sources(doc_rel: str, text: bytes) -> list[str]:
    """`training.sources[*].path` values that leave the repository (`..` past its root, or
    absolute): possible under `sources_policy: permissive`; git holds no copy of them."""
    return _source_paths(doc_rel, text)[1]
