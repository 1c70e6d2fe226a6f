"""Parsing a `.dlm`: the bytes it may hold (UTF-8 only, a BOM and CRLF/CR normalized, an
invalid byte named by line and column), and the file-level errors (missing, a directory)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dlm_git.doc.errors import DocError
from dlm_git.doc.parser import parse_document
from tests.support.docs import DLM_ID, section_id
from tests.support.parsing import HEAD, error, parse, write_dlm

# --- encoding and normalization --------------------------------------------------------------

DEMO_BODY = (
    "Intro prose line.\n\n::instruction::\n### Q\nWhat is it?\n### A\nA test.\nSecond line.\n"
)


def test_lf_document_ids_and_lines(tmp_path: Path) -> None:
    doc = parse(tmp_path, HEAD + DEMO_BODY)
    assert [(s.type_name, s.line) for s in doc.sections] == [("prose", 4), ("instruction", 7)]
    assert doc.sections[0].content == "Intro prose line."
    assert doc.sections[1].content == "### Q\nWhat is it?\n### A\nA test.\nSecond line."
    assert doc.sections[1].section_id == section_id("instruction", doc.sections[1].content)
    assert doc.frontmatter.dlm_id == DLM_ID


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(lambda b: b"\xef\xbb\xbf" + b, id="bom"),
        pytest.param(lambda b: b.replace(b"\n", b"\r\n"), id="crlf"),
        pytest.param(lambda b: b.replace(b"\n", b"\r"), id="lone-cr"),
        pytest.param(lambda b: b"\xef\xbb\xbf" + b.replace(b"\n", b"\r\n"), id="bom+crlf"),
    ],
)
def test_bom_and_line_endings_normalized(tmp_path: Path, transform) -> None:  # type: ignore[no-untyped-def]
    lf = (HEAD + DEMO_BODY).encode("utf-8")
    raw = transform(lf)
    assert raw != lf
    ref = parse_document(write_dlm(tmp_path, lf, "lf.dlm"))
    doc = parse_document(write_dlm(tmp_path, raw, "other.dlm"))
    assert [s.section_id for s in doc.sections] == [s.section_id for s in ref.sections]
    assert [s.line for s in doc.sections] == [s.line for s in ref.sections]
    assert [s.content for s in doc.sections] == [s.content for s in ref.sections]
    # dlm_sha256 is of the bytes as git stores them (CRLF as LF; BOM and lone CR kept):
    # a CRLF checkout of the LF document has its digest, other bytes differ
    assert ref.sha256 == hashlib.sha256(lf).hexdigest()
    assert doc.sha256 == hashlib.sha256(raw.replace(b"\r\n", b"\n")).hexdigest()
    assert (doc.sha256 == ref.sha256) == (raw.replace(b"\r\n", b"\n") == lf)


def test_invalid_utf8_names_line_and_col(tmp_path: Path) -> None:
    text = error(tmp_path, HEAD.encode() + b"ok line\nab\xffcd\n", DocError, 5, 3)
    assert "invalid UTF-8" in text and "0xff" in text


@pytest.mark.parametrize(
    "sep", [pytest.param(b"\r\n", id="crlf"), pytest.param(b"\r", id="lone-cr")]
)
def test_invalid_utf8_line_counts_normalized_breaks(tmp_path: Path, sep: bytes) -> None:
    # BOM, then line breaks of the given kind, then a 2-byte character before the bad byte:
    # line and column are those of the normalized text, the column counts characters
    raw = HEAD.encode().replace(b"\n", sep) + b"ok line" + sep + "é".encode() + b"\xff"
    error(tmp_path, b"\xef\xbb\xbf" + raw, DocError, 5, 2)


def test_invalid_utf8_in_frontmatter(tmp_path: Path) -> None:
    error(tmp_path, b"---\ndlm_id: \xc3\n---\n", DocError, 2, 9)


# --- file-level errors -----------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.dlm"
    with pytest.raises(DocError) as info:
        parse_document(path)
    assert str(info.value).startswith(f"{path}: no such file")


def test_directory_is_not_a_document(tmp_path: Path) -> None:
    with pytest.raises(DocError) as info:
        parse_document(tmp_path)
    assert "is a directory" in str(info.value)
