"""Expansion of `training.sources`, file by file: what is skipped and why (binary, invalid
UTF-8, size, count, the document's own outputs), each file once, its id and its text
hashed as git stores it, and the rows' digest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from dlm_git.doc.errors import SourcesError
from dlm_git.doc.walk import source_rows_digest
from tests.support.docs import WriteDoc, source_section_id
from tests.support.sources import OUTPUTS, expand, load, put, skips, sources_yaml, taken

# --- per-file skips --------------------------------------------------------------------------


def test_binary_invalid_utf8_and_size_skips(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo / "src", "bin.dat", b"abc\x00def")
    put(git_repo / "src", "late-nul.txt", b"a" * 1024 + b"\x00")  # NUL after the first KiB
    put(git_repo / "src", "latin1.txt", "caf\u00e9".encode("latin-1"))
    put(git_repo / "src", "big.txt", b"x" * 11)
    put(git_repo / "src", "fits.txt", b"y" * 10)
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: src\nmax_bytes_per_file: 10"))
    # late-nul.txt is too big for max_bytes_per_file 10; check it separately below
    assert taken(doc) == ["src/fits.txt"]
    assert skips(doc) == {
        "src/big.txt": "over max_bytes_per_file (11 > 10 bytes)",
        "src/bin.dat": "binary (NUL byte in the first KiB)",
        "src/late-nul.txt": "over max_bytes_per_file (1025 > 10 bytes)",
        "src/latin1.txt": "invalid UTF-8",
    }
    doc2 = write_doc(git_repo, frontmatter=sources_yaml("path: src/late-nul.txt"))
    assert taken(doc2) == ["src/late-nul.txt"]


def test_beyond_max_files(git_repo: Path, write_doc: WriteDoc) -> None:
    for name in ["d.txt", "c.txt", "b.txt", "a.txt"]:
        put(git_repo / "src", name, name)
    put(git_repo / "src", "0.bin", b"\x00")  # skipped files do not count
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: src\nmax_files: 2"))
    assert taken(doc) == ["src/a.txt", "src/b.txt"]
    assert skips(doc) == {
        "src/0.bin": "binary (NUL byte in the first KiB)",
        "src/c.txt": "beyond max_files (2)",
        "src/d.txt": "beyond max_files (2)",
    }
    directive = expand(doc).directives[0]
    assert (directive.index, directive.path, directive.taken, directive.skipped) == (
        0,
        "src",
        2,
        3,
    )


def test_document_outputs_and_itself_never_sources(git_repo: Path, write_doc: WriteDoc) -> None:
    for rel in [
        "dlm.lock",
        "manifest.json",
        "metrics.json",
        "train_loss.tsv",
        "verify.json",
        "run.json",
        "adapter/adapter_model.safetensors",
        "tokens/t.bin",
        "segments/s.json",
        "notes.md",
    ]:
        put(git_repo, rel, "{}")
    doc = write_doc(git_repo, "body\n", frontmatter=sources_yaml("path: ."))
    assert taken(doc) == ["notes.md"]
    reasons = skips(doc)
    for rel in [
        "doc.dlm",
        "dlm.lock",
        "manifest.json",
        "metrics.json",
        "train_loss.tsv",
        "verify.json",
        "run.json",
        "adapter/",
        "tokens/",
        "segments/",
    ]:
        assert reasons[rel] == OUTPUTS, rel
    # a single-file directive naming the document itself is refused the same way
    doc2 = write_doc(git_repo, frontmatter=sources_yaml("path: doc.dlm"))
    assert taken(doc2) == []
    assert skips(doc2) == {"doc.dlm": OUTPUTS}


def test_another_documents_outputs_are_ordinary_files(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo, "other/dlm.lock", "lock")
    doc = write_doc(git_repo / "main", frontmatter=sources_yaml("path: ../other"))
    assert taken(doc) == ["../other/dlm.lock"]


def test_single_file_directive(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo, "notes/a.md", "A\n")
    put(git_repo, "notes/b.md", "B\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: notes/b.md"))
    files = expand(doc).files
    assert [f.relpath for f in files] == ["notes/b.md"]
    assert files[0].section().content == "# source: notes/b.md\n\nB\n"
    # include patterns apply to the single file too
    doc2 = write_doc(git_repo, frontmatter=sources_yaml('path: notes/b.md\ninclude: ["*.txt"]'))
    assert taken(doc2) == []
    assert skips(doc2) == {"notes/b.md": "not matched by include"}


def test_overlapping_directives_include_a_file_once(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo, "notes/a.md", "A")
    put(git_repo, "notes/b.md", "B")
    doc = write_doc(
        git_repo, frontmatter=sources_yaml("path: notes/b.md", "path: notes", "path: ./notes/")
    )
    result = expand(doc)
    assert [f.relpath for f in result.files] == ["notes/b.md", "notes/a.md"]
    assert {s.relpath: s.reason for s in result.skipped} == {
        "notes/b.md": "already included by sources[0]",
        "notes/a.md": "already included by sources[1]",
    }
    assert [(d.taken, d.skipped) for d in result.directives] == [(1, 0), (1, 1), (0, 2)]


def test_moving_a_file_changes_its_section_id(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo, "notes/a.md", "same text\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: notes"))
    before = load(doc).rows[0]
    os.makedirs(git_repo / "notes" / "sub")
    os.replace(git_repo / "notes" / "a.md", git_repo / "notes" / "sub" / "a.md")
    after = load(doc).rows[0]
    assert before.content == "# source: notes/a.md\n\nsame text\n"
    assert after.content == "# source: notes/sub/a.md\n\nsame text\n"
    assert before.section_id == source_section_id("notes/a.md", "same text\n")
    assert after.section_id == source_section_id("notes/sub/a.md", "same text\n")
    assert before.section_id != after.section_id


def test_source_text_normalized_and_hashed_as_git_stores_it(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    """The recorded sha256 and size are of the bytes with each CRLF as LF (what git stores
    for a text file; BOM and lone CR kept, as git keeps them); the raw ones are kept to
    re-check the file and to judge older records."""
    raw = b"\xef\xbb\xbfline one\r\nline two\rline three\n"
    stored = b"\xef\xbb\xbfline one\nline two\rline three\n"
    put(git_repo, "crlf/n.txt", raw)
    put(git_repo, "lf/n.txt", b"line one\nline two\nline three\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: crlf", "path: lf"))
    crlf, lf = expand(doc).files
    assert crlf.read_text() == lf.read_text() == "line one\nline two\nline three\n"
    assert crlf.sha256 == hashlib.sha256(stored).hexdigest()
    assert crlf.size == len(stored)
    assert (crlf.raw_sha256, crlf.raw_size) == (hashlib.sha256(raw).hexdigest(), len(raw))
    assert (lf.raw_sha256, lf.raw_size) == (lf.sha256, lf.size)
    assert lf.sha256 != crlf.sha256
    # the row differs only by its relpath: its id hashes the normalized text, not the bytes
    assert crlf.section().content == "# source: crlf/n.txt\n\nline one\nline two\nline three\n"
    assert (
        crlf.section_id
        == crlf.section().section_id
        == source_section_id("crlf/n.txt", lf.read_text())
    )
    assert lf.section_id == source_section_id("lf/n.txt", lf.read_text())
    # a section built without the id (from the text alone) gets the same one
    from dlm_git.doc.sections import source_section

    assert source_section("crlf/n.txt", crlf.read_text()).section_id == crlf.section_id


def test_text_is_read_again_only_as_hashed(git_repo: Path, write_doc: WriteDoc) -> None:
    """A source file's text is read when its row is tokenized, and must still be the bytes
    that were hashed: a file changed in between is an error, never trained unrecorded."""
    put(git_repo, "src/a.txt", "first\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: src"))
    (f,) = expand(doc).files
    assert f.section().content == "# source: src/a.txt\n\nfirst\n"
    for changed in ("other\n", "first\n\n", ""):
        put(git_repo, "src/a.txt", changed)
        with pytest.raises(SourcesError, match="changed while in use"):
            f.section()
    (git_repo / "src" / "a.txt").unlink()
    with pytest.raises(SourcesError, match="cannot read source file again"):
        f.read_text()


def test_source_rows_digest_follows_the_row_ids(git_repo: Path, write_doc: WriteDoc) -> None:
    """Equal digests exactly when the files' row ids are equal, in the same order."""
    put(git_repo, "src/a.txt", "alpha\n")
    put(git_repo, "src/b.txt", "beta\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: src"))
    a, b = expand(doc).files
    digest = source_rows_digest([a, b])
    assert digest == source_rows_digest(expand(doc).files)
    put(git_repo, "src/b.txt", b"\xef\xbb\xbfbeta\r")  # other bytes, same text: same row
    b_crlf = expand(doc).files[1]
    assert b_crlf.sha256 != b.sha256 and b_crlf.section_id == b.section_id
    assert source_rows_digest([a, b_crlf]) == digest
    put(git_repo, "src/b.txt", "beta!\n")
    assert source_rows_digest(expand(doc).files) != digest
    assert source_rows_digest([b, a]) != digest
    assert source_rows_digest([a]) != digest
    assert source_rows_digest([a._replace(relpath="src/c.txt"), b]) != digest


def test_expansion_without_git_uses_document_directory_as_root(
    tmp_path: Path, write_doc: WriteDoc
) -> None:
    put(tmp_path / "d", "notes/a.md", "a")
    doc = write_doc(tmp_path / "d", frontmatter=sources_yaml("path: notes"))
    assert taken(doc) == ["notes/a.md"]
    doc2 = write_doc(tmp_path / "d", frontmatter=sources_yaml("path: .."))
    with pytest.raises(SourcesError):
        expand(doc2)
