"""A light look at a `.dlm`'s frontmatter, for hooks and verification that must stay fast.

Invariant: only a safe YAML load of the frontmatter (libyaml's when available, nesting
bounded first by `dlm_git.safeparse`; cached per document bytes); no schema validation
(callers that need validated values use `doc.parser`). Anything unreadable gives an empty result.

It also holds the one rule for where a `training.sources` path points
(`leaves_repository`, `directive_root`), which `doc.sources` applies when it expands them.
"""

from __future__ import annotations

import copy
import functools
import posixpath
from typing import Any

import yaml

from dlm_git.safeparse import load_yaml

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""A .dlm is prose and Q/A written by people; past this size it is refused (`doc.parser`)
and never peeked at (see `doc.parser` for why the bound is there)."""

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
    """The frontmatter of a `.dlm`'s bytes, `{}` when there is none to read: bytes over
    the parser's size limit (`doc.parser.MAX_DOCUMENT_BYTES`, which no document passes)
    are never decoded, split or cached."""
    if len(text) > MAX_DOCUMENT_BYTES:
        return {}
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


def leaves_repository(doc_rel: str, path: str) -> bool:
    """Whether a `training.sources` path names a place outside the repository: an
    absolute path, one under `~` (a home directory), or one whose `..` climb past the
    repository's root from the document's directory (`doc_rel`, repo-relative; `..` taken
    as text). Such a place exists on one machine only: no commit holds a copy of it, and
    an absolute path names it even when it points into this checkout."""
    if path.startswith(("/", "~")):
        return True
    joined = posixpath.normpath(posixpath.join(doc_rel, path))
    return joined == ".." or joined.startswith("../")


def directive_root(path: str) -> str:
    """What the relpaths of a directive's files start with: its path as written,
    normalised (`./notes/` -> `notes`, `~/a/../b` -> `~/b`, `//data` -> `/data`). It never
    depends on where the document or the repository sits, so a file outside the
    repository is recorded alike on every checkout (`~` is not expanded in it)."""
    root = posixpath.normpath(path)
    return "/" + root.lstrip("/") if root.startswith("//") else root


def _source_paths(doc_rel: str, text: bytes) -> tuple[list[str], list[str]]:
    """`training.sources[*].path`, joined to the document's directory: (inside the
    repository as repo-relative paths, outside it as written in the document)."""
    training = _peek(text).get("training") or {}
    inside, outside = [], []
    for spec in (training.get("sources") or []) if isinstance(training, dict) else []:
        path = spec.get("path") if isinstance(spec, dict) else None
        if isinstance(path, str):
            if leaves_repository(doc_rel, path):
                outside.append(path)
            else:
                inside.append(posixpath.normpath(posixpath.join(doc_rel, path)))
    return inside, outside


def source_dirs(doc_rel: str, text: bytes) -> list[str]:
    """Repo-relative paths named by `training.sources[*].path` (inside the repo only)."""
    return _source_paths(doc_rel, text)[0]


def outside_sources(doc_rel: str, text: bytes) -> list[str]:
    """`training.sources[*].path` values that leave the repository (`leaves_repository`):
    possible under `sources_policy: permissive`; git holds no copy of them."""
    return _source_paths(doc_rel, text)[1]
