"""Errors raised while reading a `.dlm` document or its sources.

Invariant: every error names the file and, where one exists, `line:col` (1-based),
so the CLI can print `path:line:col: message (hint: ...)` and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from dlm_git.errors import DlmGitError


class DocError(DlmGitError):
    """A document (or a file it pulls in) is malformed."""

    def __init__(
        self,
        path: Path | str,
        message: str,
        *,
        line: int | None = None,
        col: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.line = line
        self.col = col
        super().__init__(location(path, line, col), message, hint)


def location(path: Path | str, line: int | None = None, col: int | None = None) -> str:
    """`path`, `path:line` or `path:line:col`: the one way a place in a document is named."""
    subject = str(path)
    if line is not None:
        subject += f":{line}"
        if col is not None:
            subject += f":{col}"
    return subject


class FrontmatterError(DocError):
    """The YAML frontmatter is missing, does not parse, or violates the schema."""


class BodyError(DocError):
    """The Markdown body has a malformed section."""


class SourcesError(DocError):
    """A `training.sources` directive cannot be honoured (e.g. it escapes the repository)."""
