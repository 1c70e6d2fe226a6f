"""`dlm_git.gitio` reads the objects themselves: no replace ref, no graft and no pathspec
mode from the environment changes what git answers (issue 23, class 2). Real git
repositories; the end-to-end forgeries are in tests/falsifiability/test_falsify_git_rewrite.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git import gitio
from dlm_git.verify.fetch import hide_password
from tests.support.gitrepo import git


def three_commits(repo: Path) -> list[str]:
    """a <- b <- c, each writing `f`; their shas, oldest first."""
    shas = []
    for text in ("a", "b", "c"):
        (repo / "f").write_text(text + "\n")
        git(repo, "add", "f")
        git(repo, "commit", "-qm", text)
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return shas


def test_a_replace_ref_changes_no_blob_tree_or_commit(git_repo: Path) -> None:
    a, b, c = three_commits(git_repo)
    blob_c = git(git_repo, "rev-parse", f"{c}:f").strip()
    git(git_repo, "replace", blob_c, git(git_repo, "rev-parse", f"{a}:f").strip())
    git(git_repo, "replace", c, a)
    assert git(git_repo, "show", f"{c}:f") == "a\n"  # git itself answers with the replacement
    assert gitio.cat_files([f"{c}:f", ":f"], git_repo) == {f"{c}:f": b"c\n", ":f": b"c\n"}
    with gitio.BlobReader(git_repo) as reader:
        assert reader.read([f"{c}:f"]) == {f"{c}:f": b"c\n"}
    assert gitio.first_parent(c, git_repo) == b
    assert gitio.commit_info([c], git_repo)[c].parents == (b,)
    assert [p.sha for p in gitio.path_history(["f"], git_repo, c, None)] == [c, b, a]


@pytest.mark.parametrize("how", ["replace-graft", "grafts-file", "GIT_GRAFT_FILE"])
def test_a_graft_changes_no_parent(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    a, b, c = three_commits(git_repo)
    if how == "replace-graft":
        git(git_repo, "replace", "--graft", c, a)
    elif how == "grafts-file":
        (git_repo / ".git" / "info" / "grafts").write_text(f"{c} {a}\n")
    else:
        (tmp_path / "grafts").write_text(f"{c} {a}\n")
        monkeypatch.setenv("GIT_GRAFT_FILE", str(tmp_path / "grafts"))
    assert gitio.first_parent(c, git_repo) == b
    assert [p.sha for p in gitio.path_history(["f"], git_repo, c, None)] == [c, b, a]


@pytest.mark.parametrize("variable", ["GIT_ICASE_PATHSPECS", "GIT_GLOB_PATHSPECS"])
def test_pathspec_modes_from_the_environment_are_not_inherited(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """git refuses `--literal-pathspecs` beside any of them: every listing would come back
    empty, and an honest commit would look as if it held nothing."""
    (git_repo / "KEYS").mkdir()
    (git_repo / "KEYS" / "k.pem").write_text("k\n")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "keys")
    monkeypatch.setenv(variable, "1")
    assert [e[3] for e in gitio.tree_entries(["KEYS"], git_repo, "HEAD", recursive=True)] == [
        "KEYS/k.pem"
    ]
    assert gitio.tree_entries(["keys"], git_repo, "HEAD", recursive=True) == []
    assert gitio.ls_files(["KEYS"], git_repo) == ["KEYS/k.pem"]


def test_the_environment_git_sets_for_hooks_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.setenv(name, f"/x/{name}")
    env = gitio.child_env()
    assert all(env[n] == f"/x/{n}" for n in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"))
    assert env["GIT_OBJECT_DIRECTORY"] == "/x/GIT_OBJECT_DIRECTORY"
    assert env["GIT_NO_REPLACE_OBJECTS"] == "1"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://alice:s3cret@dvc.example/store", "https://alice:***@dvc.example/store"),
        ("ssh://alice@host/store", "ssh://alice@host/store"),
        ("s3://bucket/store", "s3://bucket/store"),
        ("/srv/dvc-store", "/srv/dvc-store"),
    ],
)
def test_a_remote_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert hide_password(url) == shown
