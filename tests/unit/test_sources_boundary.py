"""Expansion of `training.sources` at the repository's boundary: symlinks are never
followed, a directive may not leave the repository (unless the policy permits), and a
missing directive path is an error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git.doc.errors import SourcesError
from tests.support.docs import WriteDoc
from tests.support.sources import expand, put, skips, sources_yaml, taken

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
