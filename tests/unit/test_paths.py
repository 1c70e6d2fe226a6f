"""The one path-safety rule (`dlm_git.paths`), as a table of names, and through each place
that joins a name from hostile bytes under a directory: git tree listings written out
(`gitio.materialize`), DVC `.dir` listings (`dvcfiles`), and the sources training takes
(so that no commit dlm-git makes records a path verify would refuse to write)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from dlm_git import gitio
from dlm_git.doc.load import load_document
from dlm_git.dvcfiles import DvcRecordError, parse_dir_listing
from dlm_git.paths import Unsafe, name_problem, problem

REFUSED: dict[str, Unsafe] = {
    "": Unsafe.EMPTY,
    "/etc/passwd": Unsafe.ABSOLUTE,
    "//host/share/x": Unsafe.ABSOLUTE,
    "C:x": Unsafe.ABSOLUTE,
    "c:/windows/x": Unsafe.ABSOLUTE,
    "\\\\host\\share": Unsafe.BACKSLASH,
    "a\\..\\..\\x": Unsafe.BACKSLASH,
    "notes\\x.md": Unsafe.BACKSLASH,
    "a\0b": Unsafe.NUL,
    "..": Unsafe.DOT_COMPONENT,
    "../x": Unsafe.DOT_COMPONENT,
    "a/../../x": Unsafe.DOT_COMPONENT,
    ".": Unsafe.DOT_COMPONENT,
    "./x": Unsafe.DOT_COMPONENT,
    "a/./b": Unsafe.DOT_COMPONENT,
    "a//b": Unsafe.DOT_COMPONENT,
    "a/": Unsafe.DOT_COMPONENT,
    ".git": Unsafe.GIT_DIR,
    ".git/config": Unsafe.GIT_DIR,
    "sub/.git/hooks/pre-commit": Unsafe.GIT_DIR,
    ".GIT/config": Unsafe.GIT_DIR,
    ".Git/config": Unsafe.GIT_DIR,
    ".git./config": Unsafe.GIT_DIR,
    ".git /config": Unsafe.GIT_DIR,
    ".git . ./config": Unsafe.GIT_DIR,
    ".git::$INDEX_ALLOCATION/config": Unsafe.GIT_DIR,
    "git~1/config": Unsafe.GIT_DIR,
    "GIT~1./config": Unsafe.GIT_DIR,
}
"""Paths the rule refuses, with the reason it gives."""

ACCEPTED = [
    "x.md",
    "notes/sub/x.md",
    ".gitignore",
    ".github/workflows/ci.yml",
    ".gitx/y",
    "git/x",
    "git~2/x",
    "a.git/x",
    "sub/c:x.md",
    "0:colon.md",
    "...",
    " ",
    "-leading-dash.md",
    "line\nbreak.md",
    "tab\there.md",
    "carriage\rreturn.md",
    "esc\x1b[31m.md",
    "bidi\u202e.md",
]
"""Names, however odd, that POSIX, git and DVC carry: control characters other than NUL
among them (shown escaped wherever dlm-git prints them, never refused)."""


@pytest.mark.parametrize("path", sorted(REFUSED))
def test_the_rule_refuses(path: str) -> None:
    assert problem(path) is REFUSED[path]
    assert name_problem(path) is REFUSED[path]


@pytest.mark.parametrize("path", ACCEPTED)
def test_the_rule_accepts(path: str) -> None:
    assert problem(path) is None


def test_a_plain_name_is_one_file_directly_inside() -> None:
    assert name_problem("adapter_model.safetensors") is None
    assert name_problem("sub/x") is Unsafe.SUBDIRECTORY
    assert name_problem("..") is Unsafe.DOT_COMPONENT  # the rule first
    assert name_problem(".git") is Unsafe.GIT_DIR


# ------------------------------------------------------------------ through each caller


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, check=True
    ).stdout.decode()


def _tree(repo: Path, entries: dict[str, str]) -> str:
    """A tree object holding `entries` (name -> blob id) as given, names git would refuse
    to add included (as a hostile commit can hold them)."""
    lines = "".join(f"100644 blob {oid}\t{name}\0" for name, oid in entries.items())
    return _git(repo, "mktree", "-z", stdin=lines.encode()).strip()


def test_materialize_writes_no_entry_the_rule_refuses(git_repo: Path, tmp_path: Path) -> None:
    blob = _git(git_repo, "hash-object", "-w", "--stdin", stdin=b"# a note\n").strip()
    inner = _tree(git_repo, {"x.md": blob})
    lines = (
        f"100644 blob {blob}\tok.md\0"
        f"100644 blob {blob}\tback\\slash.md\0"
        f"040000 tree {inner}\t.git.\0"
        f"040000 tree {inner}\tGIT~1\0"
    )
    src = _git(git_repo, "mktree", "-z", stdin=lines.encode()).strip()
    root = _git(git_repo, "mktree", "-z", stdin=f"040000 tree {src}\tsrc\0".encode()).strip()
    commit = _git(git_repo, "commit-tree", root, "-m", "hostile names").strip()
    dest = tmp_path / "out"
    dest.mkdir()
    gitio.materialize(["src"], dest, git_repo, rev=commit)
    written = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert written == ["src/ok.md"]


def _listing(relpath: str) -> bytes:
    return f'[{{"md5": "{"0" * 32}", "relpath": "{relpath}"}}]'.encode()


@pytest.mark.parametrize("relpath", [".git/hooks/pre-commit", ".GIT./config", "git~1/x"])
def test_a_dvc_listing_naming_a_git_directory_is_malformed(relpath: str) -> None:
    with pytest.raises(DvcRecordError, match="has a '.git' component"):
        parse_dir_listing(_listing(relpath), "f" * 32 + ".dir")


def test_a_dvc_listing_of_plain_names_reads() -> None:
    assert parse_dir_listing(_listing(".github/x"), "f" * 32 + ".dir") == {".github/x": "0" * 32}


def test_training_takes_no_source_verify_would_refuse_to_write(
    git_repo: Path, write_doc: Any
) -> None:
    notes = git_repo / "d" / "notes"
    notes.mkdir(parents=True)
    for name in ("ok.md", "back\\slash.md", "C:drive.md"):
        (notes / name).write_text(f"# {name}\n", "utf-8")
    (notes / ".GIT.").mkdir()
    (notes / ".GIT." / "x.md").write_text("# inside\n", "utf-8")
    doc = write_doc(
        git_repo / "d", "Prose.\n", frontmatter="training:\n  sources:\n    - path: notes"
    )
    sources = load_document(doc).sources
    assert [f.relpath for f in sources.files] == ["notes/ok.md"]
    assert {s.relpath: s.reason for s in sources.skipped} == {
        "notes/back\\slash.md": "path holds a backslash (never written out of a commit)",
        "notes/C:drive.md": "path is absolute (never written out of a commit)",
        "notes/.GIT./x.md": "path has a '.git' component (never written out of a commit)",
    }
