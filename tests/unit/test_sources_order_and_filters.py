"""Expansion of `training.sources`: the rows' order (the document's sections, then source
files by POSIX relpath), include/exclude patterns, the default excludes and `.dlmignore`."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.doc.errors import DocError
from dlm_git.doc.walk import DEFAULT_EXCLUDES
from tests.support.docs import WriteDoc, source_section_id
from tests.support.sources import OUTPUTS, expand, load, put, skips, sources_yaml, taken

# --- order -----------------------------------------------------------------------------------


def test_sorted_posix_relpath_order_regardless_of_creation(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    names = ["a.txt", "a/b.txt", "B.txt", "ä.txt", "a-b.txt", "a/a/z.txt", "Z/y.txt", "_.txt"]
    for name in sorted(names, reverse=True):
        put(git_repo / "notes", name, f"text of {name}\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: notes"))
    expected = [f"notes/{n}" for n in sorted(names)]
    # code point order: '-' < '.' < '/' < upper case < '_' < lower case < non-ASCII
    assert expected == [
        "notes/B.txt",
        "notes/Z/y.txt",
        "notes/_.txt",
        "notes/a-b.txt",
        "notes/a.txt",
        "notes/a/a/z.txt",
        "notes/a/b.txt",
        "notes/ä.txt",
    ]
    assert taken(doc) == expected
    loaded = load(doc)
    assert [s.source_path for s in loaded.rows] == expected
    assert loaded.sources.skipped == ()


def test_rows_are_document_sections_then_sources(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo, "notes/n.md", "note\n")
    doc = write_doc(
        git_repo,
        "prose\n::instruction::\n### Q\nq\n### A\na\n",
        frontmatter=sources_yaml("path: notes"),
    )
    rows = load(doc).rows
    assert [(r.type_name, r.source_path) for r in rows] == [
        ("prose", None),
        ("instruction", None),
        ("prose", "notes/n.md"),
    ]
    assert rows[2].content == "# source: notes/n.md\n\nnote\n"
    assert rows[2].line is None
    assert rows[2].section_id == source_section_id("notes/n.md", "note\n")


# --- filters ---------------------------------------------------------------------------------


def test_include_and_exclude_patterns(git_repo: Path, write_doc: WriteDoc) -> None:
    for rel in ["a.md", "b.txt", "c.py", "drafts/d.md", "deep/e.md", "deep/f.txt"]:
        put(git_repo / "src", rel, rel)
    directive = 'path: src\ninclude: ["*.md", "*.txt"]\nexclude: ["drafts/", "f.txt"]'
    doc = write_doc(git_repo, frontmatter=sources_yaml(directive))
    assert taken(doc) == ["src/a.md", "src/b.txt", "src/deep/e.md"]
    assert skips(doc) == {
        "src/c.py": "not matched by include",
        "src/drafts/": "matched by exclude",
        "src/deep/f.txt": "matched by exclude",
    }


def test_anchored_include(git_repo: Path, write_doc: WriteDoc) -> None:
    for rel in ["top.md", "sub/inner.md"]:
        put(git_repo / "src", rel, rel)
    doc = write_doc(git_repo, frontmatter=sources_yaml('path: src\ninclude: ["/*.md"]'))
    assert taken(doc) == ["src/top.md"]
    assert skips(doc) == {"src/sub/inner.md": "not matched by include"}


def test_default_excludes_skipped_with_reason(git_repo: Path, write_doc: WriteDoc) -> None:
    excluded_files = ["secret.pem", "server.key", ".env", ".env.local", "id_rsa", "id_rsa.pub"]
    excluded_dirs = [".venv", "__pycache__", "node_modules", ".dvc"]
    for rel in excluded_files:
        put(git_repo, rel, "SECRET")
    for d in excluded_dirs:
        put(git_repo, f"{d}/inside.txt", "x")
    put(git_repo, "keep.txt", "keep")
    put(git_repo, "sub/.env", "SECRET")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: ."))
    assert taken(doc) == ["keep.txt"]
    reasons = skips(doc)
    expected = {rel: "default exclude" for rel in [*excluded_files, "sub/.env"]}
    expected.update({f"{d}/": "default exclude" for d in [".git", *excluded_dirs]})
    expected["doc.dlm"] = OUTPUTS
    assert reasons == expected
    assert list(reasons) == sorted(reasons)  # the report is in relpath order too
    for pattern in [".git/", ".venv/", "__pycache__/", "*.pem", "*.key", ".env", ".env.*"]:
        assert pattern in DEFAULT_EXCLUDES
    # files are checked by name only, which is exact while no default has an inner slash
    assert all("/" not in p.rstrip("/") for p in DEFAULT_EXCLUDES)


def test_default_excludes_on_a_file_name_agree_with_pathspec_on_its_path() -> None:
    """Files are matched by name against the default excludes compiled anchored; that must
    be what pathspec says of the whole path, at any depth (directories are checked by the
    walk as it enters them)."""
    import pathspec

    from dlm_git.doc.walk import _defaults

    spec = pathspec.GitIgnoreSpec.from_lines(DEFAULT_EXCLUDES)
    by_name = _defaults()[1]
    names = [
        ".env", ".env.local", "x.env", ".envrc", "server.key", "key", "a.pem", "a.pem.txt",
        "x.p12", "x.pfx", "id_rsa", "id_rsa.pub", "my_id_rsa", "id_ed25519_sk", ".netrc",
        "netrc", ".pypirc", ".dlmignore", ".git", "node_modules", "venv", "__pycache__",
        "README.md", "notes.txt", ".dvc", ".gitignore",
    ]  # fmt: skip
    for name in names:
        for path in (name, f"sub/{name}", f"a/b/{name}"):
            assert bool(by_name.match(name)) == spec.match_file(path), path


def test_include_cannot_override_default_excludes(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo, "src/server.key", "SECRET")
    doc = write_doc(git_repo, frontmatter=sources_yaml('path: src\ninclude: ["*.key"]'))
    assert taken(doc) == []
    assert skips(doc) == {"src/server.key": "default exclude"}


def test_dlmignore_at_source_root(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo / "src", ".dlmignore", "# comment\r\n*.log\r\nprivate/\r\n!keep.log\r\n")
    for rel in ["a.md", "b.log", "keep.log", "private/p.md", "sub/c.log"]:
        put(git_repo / "src", rel, rel)
    put(git_repo / "src", "sub/.dlmignore", "*.md\n")  # only the root's .dlmignore applies
    put(git_repo / "src", "sub/d.md", "d")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: src"))
    assert taken(doc) == ["src/a.md", "src/keep.log", "src/sub/d.md"]
    assert skips(doc) == {
        "src/.dlmignore": "default exclude",
        "src/b.log": "matched by .dlmignore",
        "src/private/": "matched by .dlmignore",
        "src/sub/.dlmignore": "default exclude",
        "src/sub/c.log": "matched by .dlmignore",
    }


def test_dlmignore_invalid_utf8_is_a_doc_error(git_repo: Path, write_doc: WriteDoc) -> None:
    ignore = put(git_repo / "src", ".dlmignore", b"*.log\n\xff\n")
    put(git_repo / "src", "a.md", "a")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: src"))
    with pytest.raises(DocError) as info:
        expand(doc)
    assert str(info.value).startswith(f"{ignore}:2:1: invalid UTF-8")
