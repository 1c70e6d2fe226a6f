"""Source names the path rule refuses, in a commit an older dlm-git made: CANNOT_VERIFY,
never FAILED (nothing was compared), and never VERIFIED.

Before the one path-safety rule (`dlm_git.paths`), training took a file named
`back\\slash.md` or `C:drive.md` under a directive as a source like any other and
recorded it. Today's dlm-git neither writes such a name out of a commit nor takes it as a
source (`doc/walk.py` skips it with the reason), so re-expanding that commit's sources
cannot find the recorded file. That is no difference found: `sources.root` and
`sections.order` are absent for it, naming the file and the reason, while every other
recorded file is still compared (an edited one FAILS). The rule applies to the name
*under the directive's root*: an entry whose name only leaves the repository (`../..`)
is no such file and stays a difference (tests/unit/test_line_endings_and_outside.py).

A directive whose *own* repository path the rule refuses (`sub\\dir`) is refused by
today's train, show and tokenize (one line, exit 1, nothing written). A commit an older
dlm-git made with one is CANNOT_VERIFY: the directive is named and not read, its recorded
files are not compared, and everything else is judged as usual.

Each test takes a copy of the session's verified repository (`forge`), puts the files in
it and writes the manifest the way an older dlm-git recorded them (`record_as_old`),
commits it and runs the real `dlm-git verify`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dlm_git.manifest.records import sources_record
from tests.support.cli import dlm_git
from tests.support.docs import WriteDoc, source_section_id
from tests.support.files import snapshot
from tests.support.forger import Forge
from tests.support.verified import DOC

pytestmark = pytest.mark.slow

REFUSED = {
    "notes/back\\slash.md": b"# A backslash in its name\n\nTrained on before the path rule.\n",
    "notes/C:drive.md": b"# A drive letter leading its name\n\nTrained on before it too.\n",
}
"""Files an older dlm-git took as sources (relative to the document's directory)."""


def record_as_old(forge: Forge, files: dict[str, bytes], *, put: bool = True) -> None:
    """Record `files` among the document's sources as a dlm-git without the path rule
    did: each file's entry in expansion order (sorted relpaths: those of a directive after
    `notes` sort after its files), its section id among the sources' and the Merkle root
    over them all. With `put`, the files are written into the work tree too (the honest
    commit holds them)."""
    manifest = forge.manifest()
    entries = manifest["sources"]["files"]
    own = manifest["section_ids"][: len(manifest["section_ids"]) - len(entries)]
    ids = dict(
        zip((e["relpath"] for e in entries), manifest["section_ids"][len(own) :], strict=True)
    )
    for relpath, data in files.items():
        if put:
            forge.write(f"{DOC}/{relpath}", data)
        sha256 = hashlib.sha256(data).hexdigest()  # LF text: its canonical and normal form
        entries.append({"relpath": relpath, "sha256": sha256, "size": len(data)})
        ids[relpath] = source_section_id(relpath, data.decode("utf-8"))
    entries.sort(key=lambda e: e["relpath"])
    record = sources_record((e["relpath"], e["sha256"], e["size"]) for e in entries)
    manifest["sources"] = record.model_dump(mode="json")
    manifest["section_ids"] = own + [ids[e["relpath"]] for e in entries]
    forge.write_manifest(manifest)


def test_an_old_commit_with_refused_names_cannot_be_verified_and_says_why(forge: Forge) -> None:
    record_as_old(forge, REFUSED)
    forge.commit("trained by an older dlm-git")
    held = forge.git("ls-tree", "-r", "-z", "--name-only", "HEAD", DOC).split("\0")
    assert {f"{DOC}/{rel}" for rel in REFUSED} <= set(held), held
    result = forge.verify("HEAD")
    why = result.explain()
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", why
    got = {c["name"]: c["state"] for c in result.checks}
    assert {n for n, s in got.items() if s != "ok"} == {"sources.root", "sections.order"}, why
    assert got["sources.root"] == got["sections.order"] == "absent", why
    detail = result.check("sources.root")["detail"]
    assert "2 recorded files have names this dlm-git's path rule refuses" in detail, why
    assert "notes/back\\slash.md: path holds a backslash" in detail, why
    assert "notes/C:drive.md: path is absolute" in detail, why
    assert "the other 1 match" in detail, why
    assert "2 section ids of files not read" in result.check("sections.order")["detail"], why


def test_the_work_tree_that_holds_them_cannot_be_verified_either(forge: Forge) -> None:
    """`verify --worktree` finds the files on disk and skips them for the path rule: the
    record's entries are not read there either."""
    record_as_old(forge, REFUSED)
    result = forge.verify("--worktree", "--doc", DOC)
    assert result.verdict == "CANNOT_VERIFY", result.explain()
    assert result.check("sources.root")["state"] == "absent", result.explain()


def test_an_edited_file_beside_them_still_fails(forge: Forge) -> None:
    """The refused names take nothing else out of the comparison: an in-repo source that
    differs from its record is a difference, whatever else the record holds."""
    record_as_old(forge, REFUSED)
    forge.write(f"{DOC}/notes/README.md", b"# Edited after training\n")
    forge.commit("an edited source beside names the rule refuses")
    result = forge.verify("HEAD")
    why = result.explain()
    assert result.code == 1 and result.verdict == "FAILED", why
    assert result.check("sources.root")["state"] == "failed", why
    assert "changed: demo/notes/README.md" in result.check("sources.root")["detail"], why


@pytest.mark.parametrize(
    "relpath",
    ["notes/forged\\entry.md", "notes/D:forged.md"],
)
def test_a_forged_entry_with_a_refused_name_does_not_pass(forge: Forge, relpath: str) -> None:
    """A forger who adds such an entry to an honest record (no file behind it) gains no
    pass: nothing is compared for it, so the commit cannot be VERIFIED."""
    record_as_old(forge, {relpath: b"never in any commit\n"}, put=False)
    forge.commit("a forged source entry")
    result = forge.verify("HEAD")
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", result.explain()
    assert result.check("sources.root")["state"] == "absent", result.explain()


def test_a_name_refused_only_above_the_directive_root_is_a_difference(forge: Forge) -> None:
    """The rule is applied to the name under a directive's root (`notes`): an entry
    outside every root is an ordinary recorded file that is not there. (A directive whose
    own path the rule refuses is another case: see the tests below.)"""
    record_as_old(forge, {"other\\dir/x.md": b"not under notes\n"}, put=False)
    forge.commit("an entry under no directive")
    result = forge.verify("HEAD")
    why = result.explain()
    assert result.verdict == "FAILED" and result.check("sources.root")["state"] == "failed", why
    assert "gone: demo/other\\dir/x.md" in result.check("sources.root")["detail"], why


# --------------------------------------------------------------------------- a directive's own path

REFUSED_DIR = "sub\\dir"
"""A directory an older dlm-git trained on as a directive: its own name holds a backslash
(a name to git on POSIX, which verify never writes out of a commit)."""
DIR_FILES = {f"{REFUSED_DIR}/a.md": b"# Under a refused directory\n\nTrained on before the rule.\n"}
DIRECTIVE_WHY = (
    f"training.sources path '{REFUSED_DIR}' names '{DOC}/{REFUSED_DIR}' in the repository,"
    " which holds a backslash, a name this dlm-git's path rule refuses"
)


def add_directive(forge: Forge, path: str = REFUSED_DIR) -> str:
    """The `.dlm` with directive `path` after `notes` (re-bound in lock and manifest, as
    the dlm-git that trained on it recorded it); its text."""
    text = forge.read(f"{DOC}/{DOC}.dlm").decode("utf-8")
    anchor = '      include: ["*.md", "*.txt"]\n'
    assert text.count(anchor) == 1, "starter document changed: update add_directive"
    text = text.replace(anchor, f"{anchor}    - path: '{path}'\n")
    forge.rebind_document(text)
    return text


def test_an_old_commit_whose_directive_path_the_rule_refuses_cannot_be_verified(
    forge: Forge,
) -> None:
    """An older dlm-git trained on `sub\\dir` and recorded its file: the commit holds it,
    but verify cannot write it out, so `sources.root` is absent naming the directive and
    the rule's reason, never FAILED; every other check of the document is judged (ok)."""
    add_directive(forge)
    record_as_old(forge, DIR_FILES)
    forge.commit("trained by an older dlm-git on a directory named sub\\dir")
    held = forge.git("ls-tree", "-r", "-z", "--name-only", "HEAD", DOC).split("\0")
    assert f"{DOC}/{REFUSED_DIR}/a.md" in held, held
    result = forge.verify("HEAD")
    why = result.explain()
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", why
    assert "Traceback" not in result.stderr, result.stderr
    got = {c["name"]: c["state"] for c in result.checks}
    assert {n for n, s in got.items() if s != "ok"} == {"sources.root", "sections.order"}, why
    assert got["sources.root"] == got["sections.order"] == "absent", why
    detail = result.check("sources.root")["detail"]
    assert DIRECTIVE_WHY in detail and "the 1 recorded under it were not checked" in detail, why
    assert "(rename the directory and train again)" in detail and "the other 1 match" in detail
    worktree = forge.verify("--worktree", "--doc", DOC)  # it holds sub\\dir: not read either
    assert worktree.verdict == "CANNOT_VERIFY", worktree.explain()
    assert worktree.check("sources.root")["state"] == "absent", worktree.explain()


def test_an_edited_source_beside_the_refused_directive_still_fails(forge: Forge) -> None:
    add_directive(forge)
    record_as_old(forge, DIR_FILES)
    forge.write(f"{DOC}/notes/README.md", b"# Edited after training\n")
    forge.commit("an edited source beside a refused directive")
    result = forge.verify("HEAD")
    why = result.explain()
    assert result.code == 1 and result.verdict == "FAILED", why
    assert "changed: demo/notes/README.md" in result.check("sources.root")["detail"], why


@pytest.mark.parametrize(
    ("path", "files"),
    [(REFUSED_DIR, DIR_FILES), ("C\\drive", {}), ("../.git", {})],
    ids=["entries-without-files", "no-entries", "dot-git"],
)
def test_a_forged_refused_directive_does_not_pass(
    forge: Forge, path: str, files: dict[str, bytes]
) -> None:
    """A forger who adds such a directive to an honest commit (nothing in the tree under
    it, with or without recorded entries) gains no pass: it is not read, so the commit
    cannot be VERIFIED."""
    add_directive(forge, path)
    record_as_old(forge, files, put=False)
    forge.commit("a forged directive")
    result = forge.verify("HEAD")
    why = result.explain()
    assert result.code == 1 and result.verdict == "CANNOT_VERIFY", why
    assert result.check("sources.root")["state"] == "absent", why
    assert f"training.sources path '{path}'" in result.check("sources.root")["detail"], why


@pytest.mark.parametrize("command", ["train", "show", "tokenize"])
def test_expanding_a_refused_directive_is_one_line_and_writes_nothing(
    git_repo: Path, write_doc: WriteDoc, command: str
) -> None:
    """Today's dlm-git never trains on such a directory: one line naming the document, the
    directive's line, what is wrong and the fix, exit 1, and no file written."""
    (git_repo / "d" / REFUSED_DIR).mkdir(parents=True)
    (git_repo / "d" / REFUSED_DIR / "a.md").write_bytes(b"# Would be trained on\n")
    frontmatter = f"training:\n  sources:\n    - path: '{REFUSED_DIR}'\n"
    doc = write_doc(git_repo / "d", "Some prose.\n", frontmatter=frontmatter)
    before = snapshot(git_repo)
    line = dlm_git(git_repo, command, str(doc), timeout=120).one_line_error(1, "d/doc.dlm:5:")
    assert f"training.sources[0].path '{REFUSED_DIR}' names 'd/{REFUSED_DIR}'" in line, line
    assert "holds a backslash" in line and "(hint: rename it" in line, line
    assert snapshot(git_repo) == before
    assert not (git_repo / "d" / "dlm.lock").exists()
