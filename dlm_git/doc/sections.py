"""Sections: the rows a document contributes to training, each with a stable id.

Invariant: a section of the document has `section_id = sha256(type + "\\n" + content)[:16]`
where `content` is the normalized text (BOM stripped, LF line endings) and `type` is the
section kind, with `#<adapter>` appended when the fence names an adapter. A source file
has `section_id = sha256("source\\n" + relpath + "\\n" + sha256_hex(text))[:16]` over its
normalized text (see `source_section_id`). Every instruction pair, every preference
triple and every source file is its own section with its own id; identical content of
the same type (and for a source, the same relpath) gives the same id and the same
tokens, anything else differs. A probe pair (`### Q !probe`) has its header line as
written in its content, so marking a pair changes its id (the original `dlm` tool's
section id hashes the marker too); its question, which is trained on, has no marker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dlm_git.hashing import sha256_text

SectionKind = Literal["prose", "instruction", "preference"]


def compute_section_id(type_name: str, content: str) -> str:
    return sha256_text(type_name + "\n" + content)[:16]


@dataclass(frozen=True)
class Section:
    kind: SectionKind
    content: str
    line: int | None = None
    """1-based line of the section (or pair) in the `.dlm`; None for source files."""
    adapter: str | None = None
    source_path: str | None = None
    question: str | None = None
    answer: str | None = None
    prompt: str | None = None
    chosen: str | None = None
    rejected: str | None = None
    probe: bool = False
    """An instruction pair marked `### Q !probe` (still trained on, like any pair)."""
    section_id: str = ""
    """Computed from type and content at creation unless the creator passes it (source
    files compute it from their bytes: `source_section_id`)."""

    def __post_init__(self) -> None:
        if not self.section_id:
            object.__setattr__(self, "section_id", compute_section_id(self.type_name, self.content))

    @property
    def type_name(self) -> str:
        return self.kind if self.adapter is None else f"{self.kind}#{self.adapter}"

    @property
    def first_line(self) -> str:
        lead = self.question or self.prompt or self.content
        for text in lead.split("\n"):
            if text.strip():
                return text.strip()
        return ""


def prose_section(text: str, line: int | None, adapter: str | None = None) -> Section:
    return Section(kind="prose", content=text, line=line, adapter=adapter)


def source_section(relpath: str, text: str, section_id: str | None = None) -> Section:
    """A source file's section; `section_id` is its `source_section_id` when known."""
    if section_id is None:
        section_id = source_section_id(relpath, sha256_text(text))
    return Section(
        kind="prose",
        content=f"# source: {relpath}\n\n{text}",
        source_path=relpath,
        section_id=section_id,
    )


def source_section_id(relpath: str, text_sha256: str) -> str:
    """The section id of a source file: it commits to the relpath and to the sha256 of the
    file's normalized text (which is the file's own sha256 unless normalizing changed
    it), so expanding sources hashes each file once."""
    return sha256_text(f"source\n{relpath}\n{text_sha256}")[:16]


PROBE_HEADER = "### Q !probe"
"""The question header of a probe pair, exactly (the original `dlm` tool's form)."""


def instruction_section(
    question: str, answer: str, line: int, adapter: str | None, probe: bool = False
) -> Section:
    header = PROBE_HEADER if probe else "### Q"
    return Section(
        kind="instruction",
        content=f"{header}\n{question}\n### A\n{answer}",
        line=line,
        adapter=adapter,
        question=question,
        answer=answer,
        probe=probe,
    )


def preference_section(
    prompt: str, chosen: str, rejected: str, line: int, adapter: str | None
) -> Section:
    return Section(
        kind="preference",
        content=f"### Prompt\n{prompt}\n### Chosen\n{chosen}\n### Rejected\n{rejected}",
        line=line,
        adapter=adapter,
        prompt=prompt,
        chosen=chosen,
        rejected=rejected,
    )
