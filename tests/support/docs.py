"""`.dlm` documents for tests: the one writer of a document's bytes, the one edit of a
starter document's training config, and the section ids as docs/format.md defines them.

A test's document is its frontmatter between `---` fences (a `dlm_id` first) and a body;
`write_doc` writes exactly those bytes, so a test states in its own words what the
document holds. The ids here are computed from the format's definition, never by the
library, so a test comparing them with the library's can fail.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

DLM_ID = "01M800GRBP0GEV3WAMXAHDD42B"
"""The `dlm_id` of test documents unless a test needs another."""

WriteDoc = Callable[..., Path]
"""The type of the `write_doc` fixture (tests/conftest.py)."""


def write_doc(
    directory: Path,
    body: str = "",
    *,
    frontmatter: str = "",
    name: str = "doc.dlm",
    dlm_id: str | None = DLM_ID,
) -> Path:
    """Write `<directory>/<name>`: `---`, `dlm_id`, the extra frontmatter YAML, `---`, body."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["---"]
    if dlm_id is not None:
        lines.append(f"dlm_id: {dlm_id}")
    if frontmatter:
        lines.append(frontmatter.strip("\n"))
    lines.append("---")
    text = "\n".join(lines) + "\n" + body
    path = directory / name
    path.write_bytes(text.encode("utf-8"))
    return path


def set_training(text: str, **values: object) -> str:
    """A document's text with each `training.<key>: ...` line set to `values[key]`; each
    key must already have exactly one line (a starter document changed otherwise)."""
    for key, value in values.items():
        text, n = re.subn(rf"(?m)^(  {key}:) .*$", rf"\g<1> {value}", text)
        assert n == 1, f"the document has no training.{key} line to edit"
    return text


def section_id(type_name: str, content: str) -> str:
    """A section's id as docs/format.md defines it, computed independently of the library."""
    return hashlib.sha256((type_name + "\n" + content).encode("utf-8")).hexdigest()[:16]


def source_section_id(relpath: str, text: str) -> str:
    """A source file's id: relpath and the sha256 of its normalized text (docs/format.md)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return hashlib.sha256(f"source\n{relpath}\n{digest}".encode()).hexdigest()[:16]
