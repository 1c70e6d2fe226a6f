"""Parsing a `.dlm`'s body into sections: instruction pairs, preference triples and prose,
each with its own line and id, the errors of a malformed one, and the section id formula."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dlm_git.doc.errors import BodyError
from dlm_git.doc.parser import parse_document
from tests.support.docs import DLM_ID, section_id
from tests.support.parsing import HEAD, error, parse, write_dlm

# --- body: instruction pairs -----------------------------------------------------------------


def test_multiple_pairs_each_own_id_and_line(tmp_path: Path) -> None:
    body = (
        "::instruction::\n"  # 4
        "### Q\n"  # 5
        "one?\n"
        "### A\n"
        "1\n"
        "\n"
        "### Q\n"  # 10
        "two?\n"
        "### A\n"
        "2\n"
        "### Q\n"  # 14
        "three?\n"
        "\n"
        "### A\n"
        "\n"
        "3\n"
        "\n"
    )
    doc = parse(tmp_path, HEAD + body)
    assert [s.line for s in doc.sections] == [5, 10, 14]
    assert [(s.question, s.answer) for s in doc.sections] == [
        ("one?", "1"),
        ("two?", "2"),
        ("three?", "3"),
    ]
    assert [s.content for s in doc.sections] == [
        "### Q\none?\n### A\n1",
        "### Q\ntwo?\n### A\n2",
        "### Q\nthree?\n### A\n3",
    ]
    ids = [s.section_id for s in doc.sections]
    assert ids == [section_id("instruction", s.content) for s in doc.sections]
    assert len(set(ids)) == 3


def test_identical_pair_twice_same_id(tmp_path: Path) -> None:
    pair = "### Q\nSame?\n### A\nYes.\n"
    doc = parse(tmp_path, HEAD + "::instruction::\n" + pair + pair + "::instruction::\n" + pair)
    assert len(doc.sections) == 3
    assert len({s.section_id for s in doc.sections}) == 1
    assert [s.line for s in doc.sections] == [5, 9, 14]


def test_multiline_question_and_inner_blank_lines_kept(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\n\nline one\n\nline two\n\n### A\n  indented\n\n"
    doc = parse(tmp_path, HEAD + body)
    assert doc.sections[0].question == "line one\n\nline two"
    assert doc.sections[0].answer == "  indented"


def test_empty_question(tmp_path: Path) -> None:
    text = error(tmp_path, HEAD + "::instruction::\n### Q\n\n   \n### A\na\n", BodyError, 5, 1)
    assert "empty '### Q'" in text


def test_empty_answer(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n### A\na\n### Q\nq2\n### A\n\n"
    text = error(tmp_path, HEAD + body, BodyError, 11, 1)
    assert "empty '### A'" in text


def test_question_without_answer_at_end(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n### A\na\n### Q\ndangling\n"
    text = error(tmp_path, HEAD + body, BodyError, 9, 1)
    assert "'### Q' has no following '### A'" in text


def test_question_without_answer_before_next_fence(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n::prose::\ntext\n"
    error(tmp_path, HEAD + body, BodyError, 5, 1)


def test_two_questions_in_a_row(tmp_path: Path) -> None:
    body = "::instruction::\n### Q\nq\n### Q\nq2\n### A\na\n"
    text = error(tmp_path, HEAD + body, BodyError, 7, 1)
    assert "'### Q' where '### A' was expected" in text


def test_answer_without_question(tmp_path: Path) -> None:
    text = error(tmp_path, HEAD + "::instruction::\n\n### A\na\n", BodyError, 6, 1)
    assert "'### A' where '### Q' was expected" in text


def test_text_before_first_question(tmp_path: Path) -> None:
    body = "::instruction::\n\nstray text\n### Q\nq\n### A\na\n"
    text = error(tmp_path, HEAD + body, BodyError, 6, 1)
    assert "text before the first '### Q'" in text


def test_section_with_no_pairs(tmp_path: Path) -> None:
    body = "prose\n\n::instruction::\n\n   \n::prose::\nmore\n"
    text = error(tmp_path, HEAD + body, BodyError, 6, 1)
    assert "has no '### Q' group" in text


def test_section_with_no_pairs_at_end_of_file(tmp_path: Path) -> None:
    error(tmp_path, HEAD + "::instruction::\n", BodyError, 4, 1)


# --- body: probe pairs (`### Q !probe`, the original tool's marker) --------------------------


def test_probe_pair_is_a_pair_marked_probe(tmp_path: Path) -> None:
    body = (
        "::instruction::\n"  # 4
        "### Q !probe  \n"  # 5: trailing whitespace allowed, as on every header
        "What does the lock record?\n"
        "### A\n"
        "What produced the adapter.\n"
        "\n"
        "### Q\n"  # 10
        "What does the lock record?\n"
        "### A\n"
        "What produced the adapter.\n"
    )
    probe, plain = parse(tmp_path, HEAD + body).sections
    assert (probe.probe, plain.probe) == (True, False)
    assert (probe.line, plain.line) == (5, 10)
    # the question trained on has no marker; the pair's id commits to it
    assert probe.question == plain.question == "What does the lock record?"
    assert probe.answer == plain.answer
    assert (
        probe.content
        == "### Q !probe\nWhat does the lock record?\n### A\nWhat produced the adapter."
    )
    assert probe.section_id == section_id("instruction", probe.content)
    assert plain.section_id == section_id("instruction", plain.content) != probe.section_id


def test_probe_header_in_a_code_block_or_prose_is_text(tmp_path: Path) -> None:
    body = "### Q !probe\n\n::instruction::\n### Q\n```\n### Q !probz\n```\n### A\na\n"
    prose, pair = parse(tmp_path, HEAD + body).sections
    assert prose.content == "### Q !probe"
    assert pair.question == "```\n### Q !probz\n```" and not pair.probe


@pytest.mark.parametrize(
    ("header", "col"),
    [
        ("### Q !probz", 7),
        ("### Q !PROBE", 7),
        ("### Q  !probe", 8),
        ("### Q!probe", 6),
        ("### Q\t!probe", 7),
        ("### Q !probe now", 7),
    ],
)
def test_any_other_marker_is_an_error_at_the_marker(tmp_path: Path, header: str, col: int) -> None:
    body = f"::instruction::\n### Q\nq\n### A\na\n{header}\nq\n### A\na\n"  # header on line 9
    text = error(tmp_path, HEAD + body, BodyError, 9, col)
    assert "unknown question marker" in text and "### Q !probe" in text, text


# --- body: preference triples ----------------------------------------------------------------

PREF = "### Prompt\nWhich?\n\n### Chosen\nThis.\n### Rejected\nThat.\n"


def test_preference_parsing(tmp_path: Path) -> None:
    body = "::preference::\n" + PREF + "\n" + PREF.replace("Which?", "Other?")
    doc = parse(tmp_path, HEAD + body)
    assert [(s.kind, s.line) for s in doc.sections] == [("preference", 5), ("preference", 13)]
    first, second = doc.sections
    assert (first.prompt, first.chosen, first.rejected) == ("Which?", "This.", "That.")
    assert first.content == "### Prompt\nWhich?\n### Chosen\nThis.\n### Rejected\nThat."
    assert first.section_id == section_id("preference", first.content)
    assert second.prompt == "Other?"
    assert first.section_id != second.section_id
    assert first.first_line == "Which?"


def test_preference_adapter_suffix(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "::preference#safety::\n" + PREF)
    s = doc.sections[0]
    assert s.type_name == "preference#safety"
    assert s.section_id == section_id("preference#safety", s.content)


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        pytest.param(
            "::preference::\n### Prompt\np\n### Chosen\nc\n",
            7,
            "'### Chosen' has no following '### Rejected'",
            id="no-rejected",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n",
            5,
            "'### Prompt' has no following '### Chosen'",
            id="prompt-only",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n### Rejected\nr\n",
            7,
            "'### Rejected' where '### Chosen' was expected",
            id="rejected-before-chosen",
        ),
        pytest.param(
            "::preference::\n### Chosen\nc\n",
            5,
            "'### Chosen' where '### Prompt' was expected",
            id="chosen-first",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n### Chosen\n\n### Rejected\nr\n",
            7,
            "empty '### Chosen'",
            id="empty-chosen",
        ),
        pytest.param(
            "::preference::\n### Prompt\np\n### Chosen\nc\n### Rejected\n",
            9,
            "empty '### Rejected'",
            id="empty-rejected",
        ),
        pytest.param(
            "::preference::\npreamble\n### Prompt\np\n", 5, "text before the first", id="text"
        ),
        pytest.param("::preference::\n\n", 4, "has no '### Prompt' group", id="no-triples"),
        pytest.param(
            "::preference::\n### Q\nq\n### A\na\n", 5, "text before the first", id="qa-in-pref"
        ),
    ],
)
def test_preference_errors(tmp_path: Path, body: str, line: int, needle: str) -> None:
    text = error(tmp_path, HEAD + body, BodyError, line, 1)
    assert needle in text
    assert "::preference::" in text or "### " in text


# --- body: prose -----------------------------------------------------------------------------


def test_whitespace_only_prose_dropped(tmp_path: Path) -> None:
    body = "\n   \n\t\n::instruction::\n### Q\nq\n### A\na\n::prose::\n  \n\n"
    doc = parse(tmp_path, HEAD + body)
    assert [s.kind for s in doc.sections] == ["instruction"]


def test_prose_trimmed_of_blank_lines_only(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "\n\n  indented first\nlast  \n\n\n")
    s = doc.sections[0]
    assert s.content == "  indented first\nlast  "
    assert s.line == 6
    assert s.section_id == section_id("prose", "  indented first\nlast  ")


def test_unicode_round_trips(tmp_path: Path) -> None:
    text = "Emoji 🙂👍🏽, CJK 漢字かな한국어, combining e\u0301 (not NFC-composed), RTL שלום"
    q = "Qué es 🤖?"
    body = f"{text}\n::instruction::\n### Q\n{q}\n### A\n答え\u0301\n"
    doc = parse(tmp_path, HEAD + body)
    prose, pair = doc.sections
    assert prose.content == text
    assert "e\u0301" in prose.content and "\u00e9" not in prose.content
    assert pair.question == q
    assert pair.answer == "答え\u0301"
    assert prose.section_id == section_id("prose", text)
    assert pair.section_id == section_id("instruction", f"### Q\n{q}\n### A\n答え\u0301")


def test_body_may_be_empty(tmp_path: Path) -> None:
    doc = parse(tmp_path, f"---\ndlm_id: {DLM_ID}\n---")
    assert doc.sections == ()
    assert doc.frontmatter_text == f"dlm_id: {DLM_ID}\n"


def test_closing_dashes_in_body_are_text(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + "before\n---\nafter\n")
    assert [s.content for s in doc.sections] == ["before\n---\nafter"]


# --- section id formula ----------------------------------------------------------------------


def test_section_id_formula_known_answers(tmp_path: Path) -> None:
    body = "Plain prose.\n::instruction::\n### Q\nq\n### A\na\n::preference::\n" + PREF
    doc = parse(tmp_path, HEAD + body)
    expected = [
        ("prose", "Plain prose."),
        ("instruction", "### Q\nq\n### A\na"),
        ("preference", "### Prompt\nWhich?\n### Chosen\nThis.\n### Rejected\nThat."),
    ]
    assert [(s.type_name, s.content) for s in doc.sections] == expected
    for s, (type_name, content) in zip(doc.sections, expected, strict=True):
        digest = hashlib.sha256(f"{type_name}\n{content}".encode()).hexdigest()
        assert s.section_id == digest[:16]
        assert len(s.section_id) == 16
    # pinned value: a change of formula must be deliberate
    assert doc.sections[0].section_id == section_id("prose", "Plain prose.")
    assert (
        section_id("prose", "Plain prose.")
        == hashlib.sha256(b"prose\nPlain prose.").hexdigest()[:16]
    )


def test_frontmatter_does_not_change_section_ids(tmp_path: Path) -> None:
    a = parse(tmp_path, HEAD + "same\n")
    b = parse_document(
        write_dlm(tmp_path, f"---\ndlm_id: {DLM_ID}\ntraining:\n  seed: 7\n---\n\nsame\n", "b.dlm")
    )
    assert a.sections[0].section_id == b.sections[0].section_id
    assert a.sections[0].line == 4 and b.sections[0].line == 7
    assert a.sha256 != b.sha256
