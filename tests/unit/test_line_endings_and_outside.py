"""Issue 23, classes 7 and 8, at the unit level.

Line endings: every text input (`.dlm`, source file, a record's bytes) is hashed in the
form git stores for a text file (`hashing.canonical_text`: each CRLF as LF), so an LF and a
CRLF checkout of one commit give the same digests, take and skip the same files and
train on the same rows; records made before the rule (raw-bytes digests) are recognised
as such (`TextForm.RAW`), never mistaken for a difference.

Sources outside the repository (`sources_policy: permissive`): recorded under the
directive's path as written (never relative to where the document sits), `~` expanded to
read and refused with a hint where it names no home; checking a commit reads none of them
(`Outside.SKIP`) and compares the files inside the repository all the same; training from
a commit refuses them (`Outside.REFUSE`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dlm_git.doc.compare import compare_sources
from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import parse_document
from dlm_git.doc.peek import directive_root, leaves_repository, outside_sources
from dlm_git.doc.sources import Outside, expand_sources
from dlm_git.hashing import TextForm, canonical_text, digest_text
from tests.support.docs import WriteDoc
from tests.support.sources import put


def sources_yaml(*paths: str, policy: str = "strict", extra: str = "") -> str:
    items = "".join(f"    - path: {p}\n{extra}" for p in paths)
    return f"training:\n  sources_policy: {policy}\n  sources:\n{items}"


def recorded(doc: Path, outside: Outside = Outside.READ) -> list[tuple[str, str, int]]:
    expanded = expand_sources(parse_document(doc), None, outside)
    return [(f.relpath, f.sha256, f.size) for f in expanded.files]


# --------------------------------------------------------------------------- the text rule


@pytest.mark.parametrize(
    "raw",
    [
        b"a\nb\n",
        b"a\r\nb\r\n",
        b"a\r\nb\n",  # mixed
        b"\xef\xbb\xbfa\r\nb",  # BOM kept, as git keeps it
        b"a\rb\r\n",  # lone CR kept
        b"",
    ],
)
@pytest.mark.parametrize("conversion", ["text", "autocrlf"])
def test_canonical_form_is_what_git_stores(tmp_path: Path, raw: bytes, conversion: str) -> None:
    """`canonical_text` is the bytes git stores for a file it converts (`git add` under
    the `text` attribute), checked against real git; where git leaves a file as it is
    (`core.autocrlf=true` on a file with a lone CR) both forms are the same canonical
    bytes. An LF file is its own canonical form, so every digest recorded for an LF input
    is what it was before the rule."""
    import subprocess

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f.txt").write_bytes(raw)
    config = ["-c", "core.safecrlf=false"]
    if conversion == "text":
        (repo / ".gitattributes").write_text("*.txt text\n")
    else:
        config += ["-c", "core.autocrlf=true"]
    subprocess.run(["git", *config, "add", "f.txt"], cwd=repo, check=True)
    blob = subprocess.run(
        ["git", "cat-file", "blob", ":f.txt"], cwd=repo, check=True, capture_output=True
    ).stdout
    assert canonical_text(raw) == canonical_text(blob)
    assert blob in (
        (canonical_text(raw), raw) if conversion == "autocrlf" else (canonical_text(raw),)
    )
    d = digest_text(raw)
    stored = canonical_text(blob)
    assert (d.sha256, d.size) == (hashlib.sha256(stored).hexdigest(), len(stored))
    assert (d.raw_sha256, d.raw_size) == (hashlib.sha256(raw).hexdigest(), len(raw))
    if b"\r\n" not in raw:
        assert (d.sha256, d.size) == (d.raw_sha256, d.raw_size)


def test_a_record_is_of_the_canonical_or_of_the_raw_form() -> None:
    crlf = digest_text(b"x\r\ny\r\n")
    lf = digest_text(b"x\ny\n")
    assert crlf.sha256 == lf.sha256 and crlf.size == lf.size == 4
    assert crlf.form_of(lf.sha256, 4) is TextForm.CANONICAL
    assert crlf.form_of(hashlib.sha256(b"x\r\ny\r\n").hexdigest(), 6) is TextForm.RAW
    assert crlf.form_of(hashlib.sha256(b"x\r\ny\r\n").hexdigest()) is TextForm.RAW
    # the size must be the one of the same form; a bool is not a size
    assert crlf.form_of(lf.sha256, 6) is None
    assert lf.form_of(lf.sha256, True) is None
    assert crlf.form_of(hashlib.sha256(b"x\ny!\n").hexdigest()) is None
    assert crlf.form_of(None) is None


def test_a_document_hashes_and_parses_alike_on_both_checkouts(
    tmp_path: Path, write_doc: WriteDoc
) -> None:
    lf_doc = write_doc(tmp_path / "lf", "::instruction::\n### Q\nq?\n\n### A\na.\n")
    crlf_doc = put(tmp_path / "crlf", "doc.dlm", lf_doc.read_bytes().replace(b"\n", b"\r\n"))
    lf, crlf = parse_document(lf_doc), parse_document(crlf_doc)
    assert crlf.sha256 == lf.sha256 == hashlib.sha256(lf_doc.read_bytes()).hexdigest()
    assert [s.section_id for s in crlf.sections] == [s.section_id for s in lf.sections]


def test_sources_record_alike_on_both_checkouts(git_repo: Path, write_doc: WriteDoc) -> None:
    """The same files checked out with LF and with CRLF: the same relpaths, digests, sizes,
    row ids and texts, and the same files taken and skipped, also at the limits (the size
    limit and the binary sniff apply to the canonical form)."""
    lf_files = {
        "a.md": b"one\ntwo\n",
        "fits.md": b"x\n" * 512,  # 1024 bytes: at the limit with LF, 1536 with CRLF
        "big.md": b"y\n" * 513,  # 1026 bytes: over it either way
        "nul.md": b"z\n" * 500 + b"\x00",  # NUL at 1000 (LF) or 1500 (CRLF): binary both
    }
    for name, data in lf_files.items():
        put(git_repo, f"lf/{name}", data)
        put(git_repo, f"crlf/{name}", data.replace(b"\n", b"\r\n"))
    limit = "      max_bytes_per_file: 1024\n"
    results = {}
    for side in ("lf", "crlf"):
        doc = write_doc(git_repo / side, frontmatter=sources_yaml(".", extra=limit))
        expanded = expand_sources(parse_document(doc), git_repo)
        results[side] = (
            [(f.relpath, f.sha256, f.size, f.section_id, f.read_text()) for f in expanded.files],
            sorted((s.relpath, s.reason.split(" (")[0]) for s in expanded.skipped),
        )
    assert results["crlf"] == results["lf"]
    taken, skipped = results["lf"]
    assert [t[0] for t in taken] == ["a.md", "fits.md"]
    assert ("big.md", "over max_bytes_per_file") in skipped
    assert ("nul.md", "binary") in skipped


# --------------------------------------------------------------------------- outside sources


def test_where_a_directive_points() -> None:
    assert leaves_repository("doc", "/srv/data") and leaves_repository("doc", "~/notes")
    assert leaves_repository(".", "~") and leaves_repository("a/b", "../../../x")
    assert not leaves_repository("a/b", "../../x") and not leaves_repository(".", "./~x")
    assert directive_root("~/a/../b/") == "~/b"
    assert directive_root("//srv//data/") == "/srv/data"
    assert directive_root("./notes/") == "notes"
    text = b"---\ntraining:\n  sources:\n    - path: ~/n\n    - path: ./~n\n---\n"
    assert outside_sources("d", text) == ["~/n"]


def test_an_outside_file_is_recorded_alike_wherever_the_document_sits(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path
) -> None:
    """Its relpath is the directive's path as written, not a path relative to the
    document's directory (which a checkout elsewhere, or verify's temp dir, changes)."""
    outside = put(tmp_path / "outside", "o.md", b"outside\n").parent
    yaml = sources_yaml(str(outside), policy="permissive")
    shallow = write_doc(git_repo / "a", frontmatter=yaml)
    deep = write_doc(git_repo / "x" / "y" / "z", frontmatter=yaml)
    want = [(f"{outside}/o.md", hashlib.sha256(b"outside\n").hexdigest(), 8)]
    assert recorded(shallow) == recorded(deep) == want
    single = write_doc(
        git_repo / "b", frontmatter=sources_yaml(f"{outside}/o.md", policy="permissive")
    )
    assert recorded(single) == want


def test_home_is_expanded_to_read_and_kept_in_the_relpath(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    put(home, "notes/h.md", b"home fact\r\n")
    monkeypatch.setenv("HOME", str(home))
    doc = write_doc(git_repo, frontmatter=sources_yaml("~/notes", policy="permissive"))
    assert recorded(doc) == [("~/notes/h.md", hashlib.sha256(b"home fact\n").hexdigest(), 10)]
    files = expand_sources(parse_document(doc)).files
    assert files[0].section().content == "# source: ~/notes/h.md\n\nhome fact\n"


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("~/notes", "resolves outside the repository (a home directory (`~`))"),
        ("{outside}", "resolves outside the repository (an absolute path)"),
        ("{repo}/notes", "resolves outside the repository (an absolute path)"),
        ("../outside", "resolves outside the repository (`..` past the repository's root)"),
    ],
)
def test_strict_refuses_every_path_that_names_this_machine(
    git_repo: Path,
    write_doc: WriteDoc,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    said: str,
) -> None:
    """An absolute path is refused under the strict policy even where it points into this
    checkout: another checkout (or verify's temp dir) sits elsewhere."""
    monkeypatch.setenv("HOME", str(tmp_path))
    put(tmp_path, "notes/n.md", b"n\n")
    put(tmp_path, "outside/o.md", b"o\n")
    put(git_repo, "notes/r.md", b"r\n")
    path = path.format(outside=tmp_path / "outside", repo=git_repo)
    doc = write_doc(git_repo, frontmatter=sources_yaml(path))
    with pytest.raises(SourcesError) as info:
        recorded(doc)
    assert said in str(info.value)
    assert "relative to the document's directory" in str(info.value)
    assert "sources_policy: permissive" in str(info.value)


def test_a_home_that_is_not_there_is_refused_with_a_hint(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    doc = write_doc(
        git_repo, frontmatter=sources_yaml("~no-such-user-dlm-git/x", policy="permissive")
    )
    with pytest.raises(SourcesError) as info:
        recorded(doc)
    text = str(info.value)
    assert "'~no-such-user-dlm-git' is not a home directory here" in text
    assert "./~" in text and info.value.line is not None


def test_checking_a_commit_reads_no_outside_file(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path
) -> None:
    """`Outside.SKIP` never opens an outside path (it need not exist); the files inside
    the repository are compared with the record all the same, and a difference there is
    a difference; `Outside.REFUSE` refuses the document."""
    outside = put(tmp_path / "outside", "o.md", b"outside\n").parent
    gone = put(tmp_path / "gone", "g.md", b"gone\n").parent
    put(git_repo, "notes/a.md", b"a\r\n")
    yaml = sources_yaml("notes", str(outside), str(gone), policy="permissive")
    doc = write_doc(git_repo, frontmatter=yaml)
    record = recorded(doc)  # train: reads them all
    assert [r[0] for r in record] == ["notes/a.md", f"{outside}/o.md", f"{gone}/g.md"]
    (outside / "o.md").write_bytes(b"changed on this machine\n")  # not read below
    (gone / "g.md").unlink()
    gone.rmdir()
    parsed = parse_document(doc)
    with pytest.raises(SourcesError):
        expand_sources(parsed, None, Outside.READ)  # `gone` does not exist here
    skipped = expand_sources(parsed, None, Outside.SKIP)
    assert [f.relpath for f in skipped.files] == ["notes/a.md"]
    assert [(d.root, d.outside, d.read) for d in skipped.directives] == [
        ("notes", False, True),
        (str(outside), True, False),
        (str(gone), True, False),
    ]
    found = compare_sources(parsed, skipped, record)
    assert not found.differs and found.unread_files == 2
    assert found.unread == (str(outside), str(gone))
    assert found.section_ids[-1] is None and found.section_ids[-3] is not None
    assert found.sections_match([*found.section_ids[:-2], "x", "y"])  # type: ignore[list-item]
    # a tampered in-repo file is a difference, whatever is outside
    put(git_repo, "notes/a.md", b"a, edited\n")
    tampered = compare_sources(parsed, expand_sources(parsed, None, Outside.SKIP), record)
    assert tampered.differs and tampered.changed == ("notes/a.md",)
    # a recorded in-repo file that is not there, or an in-repo file not recorded
    put(git_repo, "notes/a.md", b"a\r\n")
    extra = [("notes/b.md", "ab" * 32, 2), *record]
    assert compare_sources(parsed, skipped, extra).gone == ("notes/b.md",)
    assert compare_sources(parsed, skipped, record[1:]).new == ("notes/a.md",)
    with pytest.raises(SourcesError) as info:
        expand_sources(parsed, None, Outside.REFUSE)
    assert "cannot be trained from a commit" in str(info.value)


def test_an_older_record_of_raw_bytes_is_recognised(git_repo: Path, write_doc: WriteDoc) -> None:
    """A record made before the line-end rule holds the raw bytes' digest of a file with
    CRLF: it is that file (`legacy`), not a changed one; another file's raw digest is not."""
    put(git_repo, "notes/a.md", b"a\r\nb\r\n")
    put(git_repo, "notes/c.md", b"c\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("notes"))
    parsed = parse_document(doc)
    expanded = expand_sources(parsed)
    a, c = expanded.files
    old = [(a.relpath, a.raw_sha256, a.raw_size), (c.relpath, c.sha256, c.size)]
    assert a.raw_sha256 != a.sha256 and a.raw_size == a.size + 2
    found = compare_sources(parsed, expanded, old)
    assert not found.differs and found.legacy == 1
    wrong = [(a.relpath, hashlib.sha256(b"a\r\nX\r\n").hexdigest(), 6), old[1]]
    assert compare_sources(parsed, expanded, wrong).changed == ("notes/a.md",)


def test_only_files_outside_the_repository_go_unchecked(
    git_repo: Path, write_doc: WriteDoc, tmp_path: Path
) -> None:
    """A recorded file is taken as an unread directive's only where a directive was not
    read, the relpath leaves the repository (older records' `../..` form included) and no
    in-repo file has it: a record cannot hide an in-repo file by re-naming it, nor add an
    outside-looking file to a document that reads everything."""
    outside = tmp_path / "outside"
    outside.mkdir()
    put(git_repo, "doc/notes/a.md", b"a\n")
    doc = write_doc(
        git_repo / "doc", frontmatter=sources_yaml("notes", str(outside), policy="permissive")
    )
    parsed = parse_document(doc)
    skipped = expand_sources(parsed, None, Outside.SKIP)
    a = skipped.files[0]
    mine = (a.relpath, a.sha256, a.size)
    older = ("../../outside/o.md", "cd" * 32, 1)  # how records before the rule named it
    found = compare_sources(parsed, skipped, [mine, older])
    assert not found.differs and found.unread_files == 1
    assert found.section_ids[-2:] == (a.section_id, None)
    renamed = compare_sources(parsed, skipped, [(f"{outside}/a.md", a.sha256, a.size)])
    assert renamed.new == ("notes/a.md",)
    assert not compare_sources(parsed, skipped, [("notes/b.md", "ab" * 32, 1)]).unread_files
    inside_only = write_doc(git_repo / "doc", frontmatter=sources_yaml("notes"), name="in.dlm")
    parsed = parse_document(inside_only)
    everything = expand_sources(parsed, None, Outside.SKIP)
    assert compare_sources(parsed, everything, [mine, older]).gone == ("../../outside/o.md",)
