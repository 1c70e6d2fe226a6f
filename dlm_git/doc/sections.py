"""Sections: the rows a document contributes to training, each with a stable id.

Invariant: `section_id = sha256(type + "\\n" + content)[:16]` where `content` is the
normalized text (BOM stripped, LF line endings) and `type` is the section kind, with
`#<adapter>` appended when the fence names an adapter. Every instruction pair, every
preference triple and every source file is its own section with its own id; identical
content of the same type gives the same id (and the same tokens), anything else differs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from dlm_git.hashing import sha256_text

SectionKind = Literal["prose", "instruction", "preference"]


def section_id(type_name: str, content: str) -> str:
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

    @property
    def type_name(self) -> str:
        return self.kind if self.adapter is None else f"{self.kind}#{self.adapter}"

    @functools.cached_property
    def section_id(self) -> str:
        return section_id(self.type_name, self.content)

    @property
    def first_line(self) -> str:
        lead = self.question or self.prompt or self.content
        for text in lead.split("\n"):
            if text.strip():
                return text.strip()
        return ""


def prose_section(text: str, line: int | None, adapter: str | None = None) -> Section:
    return Section(kind="prose", content=text, line=line, adapter=adapter)


def source_section(relpath: str, text: str) -> Section:
    return Section(kind="prose", content=f"# source: {relpath}\n\n{text}", source_path=relpath)


def instruction_section(question: str, answer: str, line: int, adapter: str | None) -> Section:
    return Section(
        kind="instruction",
        content=f"### Q\n{question}\n### A\n{answer}",
        line=line,
        adapter=adapter,
        question=question,
        answer=answer,
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
