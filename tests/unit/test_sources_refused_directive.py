"""A directive whose own repository path the path rule refuses (`doc.sources`).

The rule (`dlm_git.paths`) is applied to the path git would write out of a commit: the
document's directory joined with the directive's path, normalised (`../shared` from `d`
is `shared`). A backslash, a leading drive `C:` or a `.git` component there is refused
outright when sources are expanded to be trained on or shown: one error naming the
document, the directive's line and the fix, since verify could never read those files
back out of a commit. When a record is being checked (`checking=True`: verify) such a
directive, recorded by an older dlm-git, is named and not read, and the recorded files
under its root are not compared (`doc.compare.compare_sources`): never a difference,
never a match.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.doc.compare import RefusedDirective, compare_sources
from dlm_git.doc.errors import SourcesError
from dlm_git.doc.parser import parse_document
from dlm_git.doc.sources import expand_sources
from tests.support.docs import WriteDoc
from tests.support.sources import put, sources_yaml

BACKSLASH = "names 'd/sub\\dir' in the repository, which holds a backslash"


@pytest.mark.parametrize(
    ("where", "path", "named"),
    [
        ("d", "sub\\dir", "'d/sub\\dir' in the repository, which holds a backslash"),
        ("d", "../C:dir", "'C:dir' in the repository, which is absolute"),
        ("d", "../.git", "'.git' in the repository, which has a '.git' component"),
        ("d", "notes/.GIT.", "'d/notes/.GIT.' in the repository, which has a '.git' component"),
        (".", "C:dir/notes", "'C:dir/notes' in the repository, which is absolute"),
    ],
)
def test_training_refuses_a_directive_whose_repository_path_the_rule_refuses(
    git_repo: Path, write_doc: WriteDoc, where: str, path: str, named: str
) -> None:
    """The files are there (a checkout holds them): the directive is refused all the
    same, naming the document, the directive's line and the fix."""
    put(git_repo / where, "notes/n.md", "n\n")
    put(git_repo / where / path, "a.md", "trained on before the rule\n")
    frontmatter = sources_yaml("path: notes", f"path: '{path}'")
    doc = write_doc(git_repo / where, frontmatter=frontmatter)
    with pytest.raises(SourcesError) as caught:
        expand_sources(parse_document(doc))
    err = caught.value
    assert err.path == doc and err.line == 6, err
    assert err.message.startswith(f"training.sources[1].path '{path}' names {named}:"), err
    assert "verify could never read its files back out of a commit" in err.message, err
    assert err.hint is not None and err.hint.startswith("rename it"), err


@pytest.mark.parametrize("path", ["../shared", ".", "..", "sub/C:dir", "../d/./notes/"])
def test_a_directive_whose_repository_path_the_rule_takes_is_read(
    git_repo: Path, write_doc: WriteDoc, path: str
) -> None:
    """`..` that stays inside the repository, the document's own directory, the root, and a
    drive-like name that leads no path (`d/sub/C:dir`) are read as before."""
    for rel in ("shared/a.md", "d/a.md", "d/sub/C:dir/a.md", "d/notes/a.md"):
        put(git_repo, rel, "a\n")
    doc = write_doc(git_repo / "d", frontmatter=sources_yaml(f"path: {path}"))
    expanded = expand_sources(parse_document(doc))
    assert expanded.files and not expanded.refused, expanded.directives


def test_a_checked_record_names_the_directive_and_compares_the_rest(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    """`checking=True`: the refused directive is not read; the recorded files under its
    root are excused (not compared, section id unknown), the others compared as usual."""
    put(git_repo, "d/notes/a.md", "a\n")
    put(git_repo, "d/sub\\dir/b.md", "b\n")
    doc = write_doc(git_repo / "d", frontmatter=sources_yaml("path: notes", "path: 'sub\\dir'"))
    parsed = parse_document(doc)
    expanded = expand_sources(parsed, checking=True)
    assert [(d.read, d.refused) for d in expanded.directives] == [(True, ""), (False, BACKSLASH)]
    assert [f.relpath for f in expanded.files] == ["notes/a.md"]
    (a,) = expanded.files
    record = [(a.relpath, a.sha256, a.size), ("sub\\dir/b.md", "ab" * 32, 2)]
    found = compare_sources(parsed, expanded, record)
    assert not found.differs and found.compared == 1, found
    assert found.refused_directives == (RefusedDirective("sub\\dir", BACKSLASH, 1),)
    assert found.section_ids[-2:] == (a.section_id, None)
    edited = compare_sources(parsed, expanded, [(a.relpath, "cd" * 32, 2), *record[1:]])
    assert edited.changed == ("notes/a.md",), edited


def test_a_refused_directive_with_nothing_recorded_is_still_named(
    git_repo: Path, write_doc: WriteDoc
) -> None:
    """A forged directive added with no file recorded under it (and none in the tree):
    nothing is excused, yet the directive was not read, so it is named all the same."""
    put(git_repo, "d/notes/a.md", "a\n")
    doc = write_doc(git_repo / "d", frontmatter=sources_yaml("path: notes", "path: ../.git"))
    parsed = parse_document(doc)
    expanded = expand_sources(parsed, checking=True)
    (a,) = expanded.files
    found = compare_sources(parsed, expanded, [(a.relpath, a.sha256, a.size)])
    assert not found.differs and found.compared == 1
    why = "names '.git' in the repository, which has a '.git' component"
    assert found.refused_directives == (RefusedDirective("../.git", why, 0),)
