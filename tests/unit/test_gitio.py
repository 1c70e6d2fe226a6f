"""`dlm_git.gitio`: the one place for git (index vs HEAD, GIT_INDEX_FILE, objects by id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_git import gitio
from dlm_git.errors import DlmGitError
from dlm_git.hooks import pre_commit
from tests.support.gitrepo import git

# --------------------------------------------------------------------------- git plumbing


def test_cat_files_index_head_and_missing(git_repo: Path) -> None:
    (git_repo / "a b.txt").write_bytes(b"one\n")
    git(git_repo, "add", ".")
    assert gitio.resolve_commit("HEAD", git_repo) is None
    assert gitio.staged_paths(git_repo) == ["a b.txt"]  # before the first commit
    git(git_repo, "commit", "-qm", "one")
    (git_repo / "a b.txt").write_bytes(b"two\n")
    git(git_repo, "add", ".")
    blobs = gitio.cat_files([":a b.txt", "HEAD:a b.txt", ":nope", "HEAD:", ":a b.txt"], git_repo)
    assert blobs == {":a b.txt": b"two\n", "HEAD:a b.txt": b"one\n", ":nope": None, "HEAD:": None}
    assert gitio.cat_files([], git_repo) == {}


def test_blob_reader_reads_in_rounds_and_chunks(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(300):
        (git_repo / f"f{i:03d}").write_bytes(f"{i}\n".encode() * (i + 1))
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "many")
    monkeypatch.setattr(gitio.BlobReader, "CHUNK", 7)
    with gitio.BlobReader(git_repo) as reader:
        first = reader.read([":f000", "HEAD:", ":nope", ":f000"])
        assert first == {":f000": b"0\n", "HEAD:": None, ":nope": None}
        names = [f"HEAD:f{i:03d}" for i in range(300)]
        many = reader.read(names)
        assert many == gitio.cat_files(names, git_repo)
        assert many["HEAD:f299"] == b"299\n" * 300
        assert reader.read([]) == {}


def test_blob_reader_outside_git_is_an_error(tmp_path: Path) -> None:
    with gitio.BlobReader(tmp_path) as reader, pytest.raises(DlmGitError):
        reader.read([":x"])


def test_staged_paths_follow_git_index_file(git_repo: Path) -> None:
    (git_repo / "a").write_text("a")
    (git_repo / "b").write_text("b")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "one")
    (git_repo / "a").write_text("a2")
    (git_repo / "b").write_text("b2")
    git(git_repo, "add", "a")
    assert gitio.staged_paths(git_repo) == ["a"]
    other = git_repo / ".git" / "other-index"
    git(git_repo, "read-tree", "HEAD", GIT_INDEX_FILE=str(other))
    git(git_repo, "add", "b", GIT_INDEX_FILE=str(other))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GIT_INDEX_FILE", str(other))
        assert gitio.staged_paths(git_repo) == ["b"]
        assert gitio.cat_files([":b"], git_repo) == {":b": b"b2"}


def test_materialize_index_and_commit(git_repo: Path, tmp_path: Path) -> None:
    (git_repo / "d" / "n").mkdir(parents=True)
    (git_repo / "d" / "n" / "x.md").write_text("v1")
    (git_repo / "other").write_text("o")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-qm", "one")
    (git_repo / "d" / "n" / "x.md").write_text("v2")
    git(git_repo, "add", ".")
    (git_repo / "d" / "n" / "x.md").write_text("worktree")
    gitio.materialize(["d"], tmp_path / "idx", git_repo)
    gitio.materialize(["d"], tmp_path / "head", git_repo, rev="HEAD")
    assert (tmp_path / "idx" / "d" / "n" / "x.md").read_text() == "v2"
    assert (tmp_path / "head" / "d" / "n" / "x.md").read_text() == "v1"
    assert not (tmp_path / "idx" / "other").exists()
    gitio.materialize(["missing"], tmp_path / "none", git_repo)
    assert not (tmp_path / "none").exists()


def test_toplevel_outside_git_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DlmGitError, match="not inside a git work tree"):
        gitio.toplevel(tmp_path)
    monkeypatch.setenv("DLM_GIT_STRICT", " Yes ")
    assert gitio.env_flag("DLM_GIT_STRICT")
    monkeypatch.setenv("DLM_GIT_STRICT", "0")
    assert not gitio.env_flag("DLM_GIT_STRICT")


def test_run_with_nothing_staged_is_silent(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pre_commit.run(git_repo) == 0
    (git_repo / "params.yaml").write_text("documents: []\n")
    (git_repo / "README.md").write_text("hi\n")
    git(git_repo, "add", ".")
    assert pre_commit.run(git_repo) == 0
    assert capsys.readouterr() == ("", "")


def test_run_reports_an_untrained_staged_document(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (git_repo / "doc").mkdir()
    (git_repo / "doc" / "doc.dlm").write_text("---\ndlm_id: x\n---\nbody\n")
    git(git_repo, "add", ".")
    assert pre_commit.run(git_repo) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "dlm-git: WARN doc: doc.trained: document not trained yet (no manifest.json, no"
        " dlm.lock) "
        "(run `dlm-git train doc` and stage the results)",  # no DVC pipeline here
        "dlm-git: 0 error(s), 1 warning(s) in 1 document(s): ok",
    ]
