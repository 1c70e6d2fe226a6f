"""Training rows: what each section contributes, rendered to text with a loss mask.

Invariants:
- Prose (document prose and source files) is a text row: loss on every token, EOS
  appended; a row longer than `sequence_len` is cut into consecutive windows.
- Each instruction pair is one chat row: rendered through the base's chat template when
  the tokenizer has one (system prompt, user question, assistant answer), else through
  `PLAIN_TEMPLATE`; loss only on the answer tokens (and the EOS after them); truncated to
  `sequence_len` keeping the start.
- Preference sections are not trained on (SFT only); they are counted and reported.
- `row_id` is the section id for prose; for chat rows it also binds the rendering
  context (system prompt, template kind) so a cached tokenization is never reused for a
  different rendering.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from dlm_git.doc.sections import Section
from dlm_git.doc.walk import SourceFile
from dlm_git.hashing import sha256_text

PLAIN_TEMPLATE = "### Question\n{question}\n\n### Answer\n"
PLAIN_SYSTEM = "{system}\n\n"


class Row(NamedTuple):
    """One training row. A named tuple, not a frozen dataclass: a large corpus makes one
    per source file whenever its rows are looked up one by one, and a frozen dataclass
    costs 3x to build."""

    row_id: str
    section_id: str
    kind: Literal["text", "chat"]
    section: Section | None
    """The document section; None for a source file (see `source`)."""
    source: SourceFile | None = None
    """The source file of a text row made from one; its section is built only if the row
    is tokenized, so a warm run never builds source sections."""

    def content(self) -> str:
        """The text of a text row."""
        if self.section is not None:
            return self.section.content
        assert self.source is not None
        return self.source.section().content


def chat_row_id(section_id: str, system_prompt: str | None, template_kind: str) -> str:
    context = f"chat\n{section_id}\n{template_kind}\n{system_prompt or ''}"
    return sha256_text(context)[:16]


def section_rows(
    sections: tuple[Section, ...], system_prompt: str | None, has_chat_template: bool
) -> tuple[list[Row], int]:
    """The rows of the document's own sections, in order, and the number of preference
    sections skipped."""
    template_kind = "chat_template" if has_chat_template else "plain"
    rows: list[Row] = []
    skipped_preference = 0
    for s in sections:
        if s.kind == "prose":
            rows.append(Row(s.section_id, s.section_id, "text", s))
        elif s.kind == "instruction":
            rid = chat_row_id(s.section_id, system_prompt, template_kind)
            rows.append(Row(rid, s.section_id, "chat", s))
        else:
            skipped_preference += 1
    return rows, skipped_preference


def source_rows(sources: tuple[SourceFile, ...]) -> list[Row]:
    """One text row per source file, in order."""
    rows = []
    for f in sources:
        sid = f.section_id
        rows.append(Row(sid, sid, "text", None, f))
    return rows
