"""Which probes an evaluation asks (the original tool's rule) and how an answer is judged."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dlm_git.doc.parser import parse_document
from dlm_git.eval.probes import PROBE_SAMPLE, exact_match, select_probes
from tests.support.docs import write_doc


def _pairs(n: int) -> str:
    return "".join(
        f"::instruction::\n### Q\nQuestion {i}?\n\n### A\nAnswer {i}.\n\n" for i in range(n)
    )


def _key(seed: int, question: str) -> str:
    return hashlib.sha256(f"{seed}\x00{question}".encode()).hexdigest()


def test_without_markers_the_sample_is_the_smallest_seeded_hashes(tmp_path: Path) -> None:
    doc = parse_document(write_doc(tmp_path, "Some prose.\n\n" + _pairs(7)))
    questions = [f"Question {i}?" for i in range(7)]
    expected = sorted(questions, key=lambda q: _key(42, q))[:PROBE_SAMPLE]

    probes = select_probes(doc.sections, seed=42)

    assert [p.question for p in probes] == expected
    assert [p.reference for p in probes] == [
        q.replace("Question", "Answer")[:-1] + "." for q in expected
    ]
    assert not any(p.marked for p in probes)
    assert len({p.section.section_id for p in probes}) == PROBE_SAMPLE


def test_the_sample_depends_on_the_seed_and_not_on_section_order(tmp_path: Path) -> None:
    doc = parse_document(write_doc(tmp_path, _pairs(7)))
    sections = doc.sections
    picked = [p.question for p in select_probes(sections, seed=42)]
    assert [p.question for p in select_probes(tuple(reversed(sections)), seed=42)] == picked
    others = {tuple(p.question for p in select_probes(sections, seed=s)) for s in range(5)}
    assert len(others) > 1  # another seed, another sample


def test_fewer_pairs_than_the_sample_asks_them_all_and_prose_asks_nothing(tmp_path: Path) -> None:
    doc = parse_document(write_doc(tmp_path, "Prose only.\n\n" + _pairs(2)))
    assert sorted(p.question for p in select_probes(doc.sections, 0)) == [
        "Question 0?",
        "Question 1?",
    ]
    prose = parse_document(write_doc(tmp_path / "p", "Prose only.\n"))
    assert select_probes(prose.sections, 0) == []


def test_a_repeated_question_is_asked_once(tmp_path: Path) -> None:
    body = _pairs(1) + "::instruction::\n### Q\nQuestion 0?\n\n### A\nAnother answer.\n"
    doc = parse_document(write_doc(tmp_path, body))
    assert [p.question for p in select_probes(doc.sections, 0)] == ["Question 0?"]


def test_exact_match_strips_surrounding_whitespace_only() -> None:
    assert exact_match("  It trains.\n", "It trains.")
    assert exact_match("It trains.", "\tIt trains. \n")
    assert not exact_match("it trains.", "It trains.")  # case counts
    assert not exact_match("It  trains.", "It trains.")  # inner spacing counts
    assert not exact_match("It trains", "It trains.")


def _probe_pair(i: int) -> str:
    return f"::instruction::\n### Q !probe\nMarked {i}?\n\n### A\nMarked answer {i}.\n\n"


def test_marked_pairs_come_first_in_document_order_and_the_rest_is_sampled(
    tmp_path: Path,
) -> None:
    doc = parse_document(write_doc(tmp_path, _pairs(5) + _probe_pair(1) + _probe_pair(0)))
    probes = select_probes(doc.sections, seed=42)
    assert [(p.question, p.marked) for p in probes[:2]] == [
        ("Marked 1?", True),
        ("Marked 0?", True),
    ]
    assert probes[0].reference == "Marked answer 1."
    sampled = sorted((f"Question {i}?" for i in range(5)), key=lambda q: _key(42, q))[:1]
    assert [(p.question, p.marked) for p in probes[2:]] == [(sampled[0], False)]


def test_marked_pairs_beyond_the_sample_size_are_not_asked(tmp_path: Path) -> None:
    body = "".join(_probe_pair(i) for i in range(5)) + _pairs(2)
    probes = select_probes(parse_document(write_doc(tmp_path, body)).sections, seed=0)
    assert [p.question for p in probes] == ["Marked 0?", "Marked 1?", "Marked 2?"]
