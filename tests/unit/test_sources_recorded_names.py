"""A record's source names against today's path rule (`doc.compare.compare_sources`).

A recorded file whose name *under its directive's root* the path rule refuses (a
backslash, a leading drive `C:`, a `.git` component) is one an older dlm-git took and
today's walk skips (`doc.walk.recorded_refusal`): it is not compared, its section id is
not known, and the comparison names it with the rule's reason. The rule reads the name
under the root, never the whole relpath (a directive's own `..` is no refusal), and a
name no walk can find (an empty, `.` or `..` component) is no such file: a recorded
file that is not there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.doc.compare import SourcesComparison, compare_sources
from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import parse_document
from dlm_git.doc.sources import expand_sources
from dlm_git.doc.walk import SkippedFile
from tests.support.docs import WriteDoc
from tests.support.sources import put, sources_yaml

BACKSLASH = "path holds a backslash (never written out of a commit)"
DRIVE = "path is absolute (never written out of a commit)"
GIT_DIR = "path has a '.git' component (never written out of a commit)"


def compare_with(doc: Path, *extra: str) -> tuple[SourcesComparison, list[str]]:
    """The document's expansion against its own record plus `extra` relpaths (each
    recorded after the real files); also the real files' section ids."""
    parsed = parse_document(doc)
    expanded = expand_sources(parsed)
    record = [(f.relpath, f.sha256, f.size) for f in expanded.files]
    record += [(rel, "ab" * 32, 3) for rel in extra]
    return compare_sources(parsed, expanded, record), [f.section_id for f in expanded.files]


def test_a_refused_name_under_a_directive_root_that_leaves_the_document_directory(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    """`../shared` stays inside the repository; the recorded relpath has `..` in it,
    which the rule would refuse as a whole, but the name under the root is the file's."""
    put(git_repo, "shared/a.md", "a\n")
    doc = write_doc(git_repo / "doc", frontmatter=sources_yaml("path: ../shared"))
    found, ids = compare_with(doc, "../shared/back\\slash.md", "../shared/.GIT./x.md")
    assert not found.differs and found.compared == 1 and found.unread_files == 0
    assert found.refused == (
        SkippedFile("../shared/back\\slash.md", BACKSLASH),
        SkippedFile("../shared/.GIT./x.md", GIT_DIR),
    )
    assert found.section_ids[-3:] == (ids[0], None, None)


def test_a_single_file_directive_names_its_file_alone(git_repo: Path, write_doc: WriteDoc) -> None:
    """A directive naming one file walks its directory: the name the rule reads is the
    file's own (as the walk skips it), here the record's entry at the directive's path."""
    put(git_repo, "notes/a.md", "a\n")
    doc = write_doc(
        git_repo, frontmatter=sources_yaml("path: notes/a.md", "path: notes/C:drive.md")
    )
    parsed = parse_document(doc)
    with pytest.raises(SourcesError, match="does not exist"):  # not in this checkout
        expand_sources(parsed)
    put(git_repo, "notes/C:drive.md", "trained on by an older dlm-git\n")
    expanded = expand_sources(parsed)
    assert [s.reason for s in expanded.skipped] == [DRIVE]
    found, _ = compare_with(doc, "notes/C:drive.md")
    assert not found.differs and found.refused == (SkippedFile("notes/C:drive.md", DRIVE),)


@pytest.mark.parametrize(
    "relpath",
    ["../../outside/o.md", "./x\\y.md", "notes//C:x.md", "notes/../x\\y.md", "/C:x.md"],
)
def test_a_name_no_walk_can_find_is_a_recorded_file_that_is_not_there(
    git_repo: Path, write_doc: WriteDoc, relpath: str
) -> None:
    """With the document's own directory as a root every relpath is under it: only a
    name the walk can find counts, so an outside-looking entry (nothing unread) or one
    with an empty or dot component stays a difference."""
    put(git_repo, "notes/a.md", "a\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: .\ninclude: ['notes/*.md']"))
    found, _ = compare_with(doc, relpath)
    assert found.gone == (relpath,) and not found.refused, found


def test_a_refused_part_above_the_root_is_no_refusal(git_repo: Path, write_doc: WriteDoc) -> None:
    """`C:dir` names the directive itself (`d/C:dir` in the repository: a drive leads no
    path there): files under it are taken by their names there (`a.md`), so a recorded
    `C:dir/b.md` that is not there is gone, not refused."""
    put(git_repo, "d/C:dir/a.md", "a\n")
    doc = write_doc(git_repo / "d", frontmatter=sources_yaml("path: C:dir"))
    found, _ = compare_with(doc, "C:dir/b.md", "C:dir/sub\\b.md")
    assert found.gone == ("C:dir/b.md",)
    assert found.refused == (SkippedFile("C:dir/sub\\b.md", BACKSLASH),)


def test_an_expanded_file_is_compared_whatever_its_name(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    """Only a recorded file the expansion did not take can be excused: a record cannot
    hide a taken file's difference behind a refused name elsewhere."""
    put(git_repo, "notes/a.md", "a\n")
    doc = write_doc(git_repo, frontmatter=sources_yaml("path: notes"))
    parsed = parse_document(doc)
    expanded = expand_sources(parsed)
    record = [("notes/a.md", "cd" * 32, 2), ("notes/x\\y.md", "ab" * 32, 3)]
    found = compare_sources(parsed, expanded, record)
    assert found.changed == ("notes/a.md",) and found.differs
