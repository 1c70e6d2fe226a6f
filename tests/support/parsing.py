"""A `.dlm` parsed from exactly the bytes a test gives, and the located error it expects.

Every parse error names `path:line[:col]: ` and fits on one line (the project's rule for
bad input); `error` checks exactly that before a test reads what the error says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.doc.errors import DocError
from dlm_git.doc.parser import Document, parse_document
from tests.support.docs import DLM_ID

HEAD = f"---\ndlm_id: {DLM_ID}\n---\n"  # the body starts on line 4
"""The smallest frontmatter: a document's body follows it on line 4."""


def write_dlm(tmp_path: Path, data: str | bytes, name: str = "doc.dlm") -> Path:
    """`<tmp_path>/<name>` holding exactly `data` (text as UTF-8)."""
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def parse(tmp_path: Path, data: str | bytes) -> Document:
    return parse_document(write_dlm(tmp_path, data))


def error(
    tmp_path: Path, data: str | bytes, kind: type[DocError], line: int, col: int | None = None
) -> str:
    """Parse `data`, expect `kind`, check the `path:line[:col]: ` prefix, return the text."""
    path = write_dlm(tmp_path, data)
    with pytest.raises(DocError) as info:
        parse_document(path)
    exc = info.value
    assert type(exc) is kind, f"{type(exc).__name__}: {exc}"
    text = str(exc)
    prefix = f"{path}:{line}:" if col is None else f"{path}:{line}:{col}: "
    assert text.startswith(prefix), text
    assert exc.line == line
    if col is not None:
        assert exc.col == col
    assert "\n" not in text
    return text
