"""`dlm_git.doc.peek`: the light frontmatter read the hooks use (no pydantic, no torch)."""

from __future__ import annotations

import pytest

from dlm_git.doc.peek import outside_sources, peek_frontmatter, source_dirs

# --------------------------------------------------------------------------- peek


def test_source_dirs_resolve_relative_to_the_document() -> None:
    text = (
        b"---\ntraining:\n  sources:\n    - path: notes\n    - path: ../shared\n"
        b"    - path: ../../../outside\n    - path: ../../top\n    - path: .\n"
        b"    - {include: ['*']}\n    - 7\n---\nbody\n"
    )
    assert source_dirs("docs/a", text) == ["docs/a/notes", "docs/shared", "top", "docs/a"]
    assert outside_sources("docs/a", text) == ["../../../outside"]
    assert source_dirs(".", text) == ["notes", "."]
    assert outside_sources(".", text) == ["../shared", "../../../outside", "../../top"]


def test_absolute_source_paths_are_outside() -> None:
    text = b"---\ntraining:\n  sources:\n    - path: /srv/data\n    - path: n\n---\n"
    assert source_dirs("d", text) == ["d/n"]
    assert outside_sources("d", text) == ["/srv/data"]


@pytest.mark.parametrize(
    "text",
    [b"no frontmatter", b"---\nkey: [unclosed\n---\n", b"---\nunterminated: 1\n", b"\xff\xfe"],
)
def test_peek_gives_nothing_for_unreadable_frontmatter(text: bytes) -> None:
    assert peek_frontmatter(text) == {}
    assert source_dirs("doc", text) == []


def test_peek_handles_bom_and_crlf() -> None:
    text = "\ufeff---\r\ntraining:\r\n  sources:\r\n    - path: n\r\n---\r\n".encode()
    assert source_dirs("d", text) == ["d/n"]


def test_bytes_over_the_document_limit_are_never_read() -> None:
    """Every `.dlm` of a tree is peeked at for its `dlm_id` (check `docset.dlm_id`): one
    that no parser would accept is no id, never decoded and split in memory."""
    from dlm_git.doc.peek import MAX_DOCUMENT_BYTES, peek_frontmatter

    head = b"---\ndlm_id: 01M800GRBP0GEV3WAMXAHDD42B\n---\n"
    assert peek_frontmatter(head)["dlm_id"] == "01M800GRBP0GEV3WAMXAHDD42B"
    assert peek_frontmatter(head + b"\n" * MAX_DOCUMENT_BYTES) == {}
