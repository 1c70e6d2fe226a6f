"""Expansion of `training.sources`: order, filters, skip reasons, repository boundary."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dlm_git.doc.errors import DocError, SourcesError
from dlm_git.doc.load import LoadedDocument, load_document
from dlm_git.doc.sources import DEFAULT_EXCLUDES, ExpandedSources, source_rows_digest

WriteDoc = Callable[..., Path]
OUTPUTS = "the document itself or one of its outputs"


def sources_yaml(*directives: str, policy: str | None = None) -> str:
    """`training:` YAML; each directive is the YAML body of one list item (`path: ...`)."""
    lines = ["training:"]
    if policy:
        lines.append(f"  sources_policy: {policy}")
    lines.append("  sources:")
    for d in directives:
        first, *rest = d.strip("\n").split("\n")
        lines.append(f"    - {first}")
        lines.extend(f"      {r}" for r in rest)
    return "\n".join(lines)


def put(root: Path, rel: str, data: str | bytes = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def load(doc: Path) -> LoadedDocument:
    return load_document(doc)


def expand(doc: Path) -> ExpandedSources:
    return load(doc).sources


def taken(doc: Path) -> list[str]:
    return [f.relpath for f in expand(doc).files]


def skips(doc: Path) -> dict[str, str]:
    return {s.relpath: s.reason for s in expand(doc).skipped}


def sid(type_name: str, content: str) -> str:
    return hashlib.sha256((type_name + "\n" + content).encode("utf-8")).hexdigest()[:16]


def source_sid(relpath: str, text: str) -> str:
    """A source file's id: relpath and the sha256 of its normalized text (docs/format.md)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return hashlib.sha256(f"source\n{relpath}\n{digest}".encode()).hexdigest()[:16]


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
    assert rows[2].section_id == source_sid("notes/n.md", "note\n")


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

    from dlm_git.doc.sources import _DEFAULT_NAMES

    spec = pathspec.GitIgnoreSpec.from_lines(DEFAULT_EXCLUDES)
    names = [
        ".env", ".env.local", "x.env", ".envrc", "server.key", "key", "a.pem", "a.pem.txt",
        "x.p12", "x.pfx", "id_rsa", "id_rsa.pub", "my_id_rsa", "id_ed25519_sk", ".netrc",
        "netrc", ".pypirc", ".dlmignore", ".git", "node_modules", "venv", "__pycache__",
        "README.md", "notes.txt", ".dvc", ".gitignore",
    ]  # fmt: skip
    for name in names:
        for path in (name, f"sub/{name}", f"a/b/{name}"):
            assert bool(_DEFAULT_NAMES.match(name)) == spec.match_file(path), path


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


# --- repository boundary ---------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["strict", "permissive"])
def test_symlinks_are_never_followed(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path, policy: str
) -> None:
    """A commit stores a link as its target text: following it would train on whatever
    it reaches here (a file outside, `.git/config` past the default excludes), which no
    verifier could reproduce from git. Every link is skipped, whatever the policy."""
    outside = put(tmp_path / "outside", "secret.txt", "outside text\n")
    put(git_repo, "notes/inside.txt", "inside\n")
    (git_repo / "notes" / "link.txt").symlink_to(outside)
    (git_repo / "notes" / "inlink.txt").symlink_to(Path("inside.txt"))
    (git_repo / "notes" / "cfg.txt").symlink_to(Path("../.git/config"))
    (git_repo / "notes" / "ext").symlink_to(tmp_path / "outside", target_is_directory=True)
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: notes", policy=policy))
    assert taken(doc) == ["notes/inside.txt"]
    not_followed = "symbolic link (not followed)"
    assert skips(doc) == {
        "notes/cfg.txt": not_followed,
        "notes/ext": not_followed,
        "notes/inlink.txt": not_followed,
        "notes/link.txt": not_followed,
    }


def test_directive_escaping_repo_refused(git_repo: Path, write_doc: WriteDoc) -> None:
    doc = write_doc(
        git_repo / "docs", frontmatter="base_model: builtin:tiny\n" + sources_yaml("path: ../..")
    )
    with pytest.raises(SourcesError) as info:
        expand(doc)
    text = str(info.value)
    # frontmatter: dlm_id (2), base_model (3), training (4), sources (5), path (6)
    assert text.startswith(f"{doc}:6: training.sources[0].path '../..' resolves outside")
    assert "sources_policy: permissive" in text
    assert info.value.line == 6


def test_directive_dotdot_inside_repo_is_fine(git_repo: Path, write_doc: WriteDoc) -> None:
    put(git_repo, "shared/s.md", "shared")
    doc = write_doc(git_repo / "docs", frontmatter=sources_yaml("path: ../shared"))
    assert taken(doc) == ["../shared/s.md"]


@pytest.mark.parametrize("inside", [True, False])
def test_a_directive_through_a_symlink_is_refused(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path, inside: bool
) -> None:
    put(tmp_path / "outside", "x.txt", "x")
    put(git_repo, "notes/a.txt", "a")
    target = git_repo / "notes" if inside else tmp_path / "outside"
    (git_repo / "ext").symlink_to(target, target_is_directory=True)
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: notes", "path: ext/"))
    with pytest.raises(SourcesError) as info:
        expand(doc)
    assert str(info.value).startswith(
        f"{doc}:6: training.sources[1].path 'ext/' goes through a symbolic link"
    )


def test_permissive_allows_outside_directory(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path
) -> None:
    put(tmp_path / "outside", "o.md", "outside\r\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: ../outside", policy="permissive"))
    files = expand(doc).files
    assert [f.relpath for f in files] == ["../outside/o.md"]
    assert files[0].read_text() == "outside\n"
    assert files[0].section().content == "# source: ../outside/o.md\n\noutside\n"


def test_missing_directive_path(git_repo: Path, write_doc: WriteDoc) -> None:
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: nowhere"))
    with pytest.raises(SourcesError) as info:
        expand(doc)
    assert str(info.value).startswith(f"{doc}:5: training.sources[0].path 'nowhere' does not exist")


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
    assert before.section_id == source_sid("notes/a.md", "same text\n")
    assert after.section_id == source_sid("notes/sub/a.md", "same text\n")
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
    assert crlf.section_id == crlf.section().section_id == source_sid("crlf/n.txt", lf.read_text())
    assert lf.section_id == source_sid("lf/n.txt", lf.read_text())
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
