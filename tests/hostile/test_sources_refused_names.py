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

Each test takes a copy of the session's verified repository (`forge`), puts the files in
it and writes the manifest the way an older dlm-git recorded them (`record_as_old`),
commits it and runs the real `dlm-git verify`.
"""

from __future__ import annotations

import hashlib

import pytest

from dlm_git.manifest.records import sources_record
from tests.support.docs import source_section_id
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
    did: each file's entry in expansion order (sorted relpaths under the one directive
    `notes`), its section id among the sources' and the Merkle root over them all. With
    `put`, the files are written into the work tree too (the honest commit holds them)."""
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
    assert "changed: notes/README.md" in result.check("sources.root")["detail"], why


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
    """The rule is applied to the name under the directive's root (`notes`): an entry
    outside every root, or one whose refused part is the root itself, is an ordinary
    recorded file that is not there."""
    record_as_old(forge, {"other\\dir/x.md": b"not under notes\n"}, put=False)
    forge.commit("an entry under no directive")
    result = forge.verify("HEAD")
    why = result.explain()
    assert result.verdict == "FAILED" and result.check("sources.root")["state"] == "failed", why
    assert "gone: other\\dir/x.md" in result.check("sources.root")["detail"], why
