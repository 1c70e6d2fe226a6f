"""A source file is read whole, whatever its size against the walk's first read
(`walk.FIRST_READ`, after which a file is sized with fstat) and `max_bytes_per_file`: a file
one byte either side of each edge is taken or skipped by its size alone, and a taken file
records the size and sha256 of exactly its bytes (CRLF as LF)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dlm_git.doc.walk import FIRST_READ
from tests.support.docs import WriteDoc
from tests.support.sources import expand, put, skips, sources_yaml

EDGES = [FIRST_READ - 1, FIRST_READ, FIRST_READ + 1, 2 * FIRST_READ + 3]


def line_text(size: int, end: bytes = b"\n") -> bytes:
    """`size` bytes of ASCII lines, each ending with `end`."""
    line = b"x" * 63 + end
    return (line * (size // len(line) + 1))[:size]


@pytest.mark.parametrize("limit", [FIRST_READ - 1, FIRST_READ, FIRST_READ + 1, 3 * FIRST_READ])
def test_files_about_the_first_read_are_taken_whole_or_skipped_by_size(
    git_repo: Path, write_doc: WriteDoc, limit: int
) -> None:
    sizes = sorted({*EDGES, limit - 1, limit, limit + 1})
    for size in sizes:
        put(git_repo / "src", f"{size:07d}.txt", line_text(size))
    doc = write_doc(git_repo, frontmatter=sources_yaml(f"path: src\nmax_bytes_per_file: {limit}"))
    files = {f.relpath: f for f in expand(doc).files}
    assert sorted(files) == [f"src/{n:07d}.txt" for n in sizes if n <= limit]
    for f in files.values():
        data = Path(f.abspath).read_bytes()
        assert (f.size, f.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert skips(doc) == {
        f"src/{n:07d}.txt": f"over max_bytes_per_file ({n} > {limit} bytes)"
        for n in sizes
        if n > limit
    }


def test_a_crlf_file_over_the_limit_is_read_on_to_its_canonical_size(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    # 2 * FIRST_READ bytes of CRLF lines: over a limit of 2 * FIRST_READ - 1 as read, under
    # it as recorded (CRLF as LF)
    raw = line_text(2 * FIRST_READ, b"\r\n")
    put(git_repo / "src", "crlf.txt", raw)
    doc = write_doc(
        git_repo, frontmatter=sources_yaml(f"path: src\nmax_bytes_per_file: {2 * FIRST_READ - 1}")
    )
    (f,) = expand(doc).files
    canonical = raw.replace(b"\r\n", b"\n")
    assert (f.raw_size, f.raw_sha256) == (len(raw), hashlib.sha256(raw).hexdigest())
    assert (f.size, f.sha256) == (len(canonical), hashlib.sha256(canonical).hexdigest())
