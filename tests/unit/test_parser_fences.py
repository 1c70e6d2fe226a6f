"""Parsing a `.dlm`'s body: section fences (`::instruction::`, `::preference#adapter::`...),
and code blocks, inside which nothing is a fence or a header."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.doc.errors import BodyError
from tests.support.docs import section_id
from tests.support.parsing import HEAD, error, parse

# --- body: fences and code blocks ------------------------------------------------------------


@pytest.mark.parametrize("marker", ["```", "~~~", "````"])
def test_fences_inside_code_blocks_are_text(tmp_path: Path, marker: str) -> None:
    body = f"Example:\n{marker}python\n::instruction::\n### Q\n::bogus::\n{marker}\nafter\n"
    doc = parse(tmp_path, HEAD + body)
    assert len(doc.sections) == 1
    s = doc.sections[0]
    assert (s.type_name, s.line) == ("prose", 4)
    assert s.content == body.rstrip("\n")


def test_question_header_in_answer_code_block_stays_in_answer(tmp_path: Path) -> None:
    body = (
        "::instruction::\n"
        "### Q\n"
        "How do I write a pair?\n"
        "### A\n"
        "Like this:\n"
        "```markdown\n"
        "### Q\n"
        "question\n"
        "### A\n"
        "answer\n"
        "::prose::\n"
        "```\n"
    )
    doc = parse(tmp_path, HEAD + body)
    assert len(doc.sections) == 1
    s = doc.sections[0]
    assert s.question == "How do I write a pair?"
    assert s.answer == ("Like this:\n```markdown\n### Q\nquestion\n### A\nanswer\n::prose::\n```")
    assert s.line == 5


def test_tilde_block_not_closed_by_backticks(tmp_path: Path) -> None:
    body = "~~~\n```\n::instruction::\n~~~\n"
    doc = parse(tmp_path, HEAD + body)
    assert [s.content for s in doc.sections] == ["~~~\n```\n::instruction::\n~~~"]


@pytest.mark.parametrize("marker", ["```", "~~~"])
def test_unterminated_code_block(tmp_path: Path, marker: str) -> None:
    body = f"prose\n\n{marker}\n::instruction::\n### Q\n"
    text = error(tmp_path, HEAD + body, BodyError, 6, 1)
    assert "unterminated code block" in text


def test_unterminated_code_block_closed_by_shorter_marker(tmp_path: Path) -> None:
    error(tmp_path, HEAD + "````\ncode\n```\n", BodyError, 4, 1)


@pytest.mark.parametrize(
    "fence", ["::foo::", "::Instruction::", "::instruction#::", "::instruction#a/b::", "::::"]
)
def test_unknown_fence(tmp_path: Path, fence: str) -> None:
    text = error(tmp_path, HEAD + "prose\n" + fence + "\n", BodyError, 5, 1)
    assert "unknown section fence" in text


def test_fence_trailing_whitespace_allowed(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "::instruction::   \n### Q  \nq\n### A\na\n")
    assert doc.sections[0].content == "### Q\nq\n### A\na"


@pytest.mark.parametrize("line", [" ::instruction::", "::instruction#a b::", "a ::prose::"])
def test_non_fence_lines_are_text(tmp_path: Path, line: str) -> None:
    doc = parse(tmp_path, HEAD + line + "\n")
    assert [s.content for s in doc.sections] == [line]


def test_adapter_suffix(tmp_path: Path) -> None:
    pair = "### Q\nHello?\n### A\nHi.\n"
    doc = parse(tmp_path, HEAD + "::instruction#tone::\n" + pair + "::instruction::\n" + pair)
    tone, plain = doc.sections
    assert tone.type_name == "instruction#tone" and tone.adapter == "tone"
    assert plain.type_name == "instruction" and plain.adapter is None
    assert tone.content == plain.content == "### Q\nHello?\n### A\nHi."
    assert tone.section_id == section_id("instruction#tone", tone.content)
    assert plain.section_id == section_id("instruction", plain.content)
    assert tone.section_id != plain.section_id
    assert (tone.line, plain.line) == (5, 10)


def test_prose_fence_with_adapter(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "top\n::prose#style::\nstyled text\n::prose::\nplain\n")
    assert [(s.type_name, s.content, s.line) for s in doc.sections] == [
        ("prose", "top", 4),
        ("prose#style", "styled text", 6),
        ("prose", "plain", 8),
    ]
