"""`dlm_git.docat`: a document at a revision (the index, the work tree or a commit) is one
type, read one way: which `.dlm` is the document's, which documents a tree holds, what
a revision's inputs are, and one answer to a `params.yaml` that nests too deep, whoever
reads it (hook, verify, diff, log, sign, fsck)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dlm_git import docat
from dlm_git.docat import Rev, TreeAt
from dlm_git.errors import DlmGitError
from tests.support.cli import dlm_git, hook
from tests.support.gitrepo import commit_all, commit_files, git, write_files
from tests.support.signing import keygen

DOCS = {
    "d/a.dlm": "---\n---\n",
    "d/dlm.lock": "{}",
    "d/sub/nested.dlm": "---\n---\n",  # another document's, never this one's
    "two/x.dlm": "---\n---\n",
    "two/y.dlm": "---\n---\n",
    "none/notes.md": "text\n",
    "top.dlm": "---\n---\n",
}
DEEP_PARAMS = "documents: " + "[" * 200 + "]" * 200 + "\n"


def trees(repo: Path, sha: str) -> list[TreeAt]:
    return [TreeAt(repo, Rev.INDEX), TreeAt(repo, Rev.WORKTREE), TreeAt(repo, sha)]


def test_only_a_single_direct_child_is_the_document(git_repo: Path) -> None:
    """The same rule at every revision: exactly one `.dlm` directly inside."""
    sha = commit_files(git_repo, DOCS)
    for tree in trees(git_repo, sha):
        with tree:
            found = {rel: tree.doc(rel).dlm_name for rel in ("d", "d/sub", "two", "none", ".")}
        assert found == {
            "d": "d/a.dlm",
            "d/sub": "d/sub/nested.dlm",
            "two": None,
            "none": None,
            ".": "top.dlm",
        }, tree.where
    assert docat.dlms_in(["dd/x.dlm", "d/x.dlm"], "d") == ["d/x.dlm"]


def test_a_document_reads_its_records_as_the_revision_has_them(git_repo: Path) -> None:
    """Committed, staged and on disk are three revisions of one document."""
    sha = commit_files(git_repo, {"d/d.dlm": "---\n---\ncommitted\n", "d/dlm.lock": "{}"})
    write_files(git_repo, {"d/d.dlm": "---\n---\nstaged\n"})
    git(git_repo, "add", "-A")
    write_files(git_repo, {"d/d.dlm": "---\n---\non disk\n", "d/manifest.json": "[]"})
    got = {}
    for tree in trees(git_repo, sha):
        with tree:
            doc = tree.doc("d")
            got[tree.label] = (doc.dlm, doc.lock, doc.manifest, doc.signature)
    assert got == {
        "index": (b"---\n---\nstaged\n", b"{}", None, None),
        "work tree": (b"---\n---\non disk\n", b"{}", b"[]", None),
        sha[:12]: (b"---\n---\ncommitted\n", b"{}", None, None),
    }


def test_documents_are_found_by_the_one_docset_rule(git_repo: Path) -> None:
    """params.yaml's list, then every directory whose `.dlm` has records or that holds a
    dlm.lock, listed or not."""
    sha = commit_files(git_repo, {**DOCS, "params.yaml": "documents: [two]\n"})
    for tree in trees(git_repo, sha):
        with tree:
            assert tree.documents() == ["two", "d"], tree.where


@pytest.mark.parametrize("where", ["index", "commit", "work tree"])
def test_too_deep_params_is_one_error_naming_the_revision(git_repo: Path, where: str) -> None:
    sha = commit_files(git_repo, {"d/d.dlm": "---\n---\n"})
    write_files(git_repo, {"params.yaml": DEEP_PARAMS})
    if where != "work tree":
        git(git_repo, "add", "-A")
    if where == "commit":
        sha = commit_all(git_repo, "deep params")
    revision = {"index": Rev.INDEX, "commit": sha, "work tree": Rev.WORKTREE}[where]
    with TreeAt(git_repo, revision) as tree, pytest.raises(DlmGitError) as caught:
        tree.documents()
    line = caught.value.one_line()
    label = {"index": "index", "commit": sha[:12], "work tree": "work tree"}[where]
    assert line.startswith(f"{label}:params.yaml: does not parse: nested deeper than"), line
    assert "hint: fix params.yaml" in line, line


def test_every_reader_refuses_a_too_deep_params_alike(git_repo: Path, tmp_path: Path) -> None:
    """The hook (staged or not), verify, diff, log and sign: one line naming the file,
    exit 1. Before, the hook reported it only when staged and ignored it otherwise, the
    others each said it their own way, and sign let a traceback escape."""
    commit_files(git_repo, {"d/d.dlm": "---\n---\n", "README.md": "x\n"})
    write_files(git_repo, {"params.yaml": DEEP_PARAMS})
    git(git_repo, "add", "-A")
    hook(git_repo, "pre_commit").one_line_error(1, "index:params.yaml", "nested deeper")
    sha = commit_all(git_repo, "deep params")  # git commit runs no hook here
    write_files(git_repo, {"README.md": "changed\n"})
    git(git_repo, "add", "README.md")  # not staged: the index still holds it
    hook(git_repo, "pre_commit").one_line_error(1, "index:params.yaml", "nested deeper")
    for args in (["verify", "HEAD"], ["diff", "HEAD", "HEAD"], ["log"]):
        dlm_git(git_repo, *args).one_line_error(1, "params.yaml", "nested deeper")
    (tmp_path / "keys").mkdir()
    key = str(keygen(tmp_path / "keys")[0])
    dlm_git(git_repo, "sign", "--key", key).one_line_error(1, "work tree:params.yaml", "deeper")
    assert sha


def test_fsck_reports_a_too_deep_params_as_verify_does_and_fails(git_repo: Path) -> None:
    """fsck reads the whole history, so it reports the commit rather than stopping on
    it: the very line `verify` gives for that commit, as an error, and exit 1. Before, it
    said nothing (a commit without a dvc.lock) or a note of its own, and exited 0."""
    sha = commit_files(git_repo, {"d/d.dlm": "---\n---\n", "params.yaml": DEEP_PARAMS})
    line = dlm_git(git_repo, "verify", sha).one_line_error(1, f"{sha[:12]}:params.yaml")
    human = dlm_git(git_repo, "fsck")
    assert human.code == 1, human.stdout + human.stderr
    assert f"error       {line}" in human.stdout.splitlines(), human.stdout
    assert human.stdout.splitlines()[-1] == "fsck        FAILED: 1 error in the history"
    result = dlm_git(git_repo, "fsck", "--json")
    assert result.code == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["errors"] == [{"commit": sha, "path": "params.yaml", "error": line}]


def test_every_revision_reports_its_links_and_what_lies_below_one(git_repo: Path) -> None:
    """One rule: a link (to a file or a directory) is one at every revision, the work
    tree's too, so what a commit would refuse is refused before it is committed."""
    write_files(git_repo, {"tasks/real.jsonl": "{}\n", "notes/n.md": "text\n"})
    (git_repo / "tasks" / "link.jsonl").symlink_to("real.jsonl")
    (git_repo / "linked").symlink_to("tasks")
    sha = commit_all(git_repo, "links")
    asked = ["tasks/real.jsonl", "tasks/link.jsonl", "linked/real.jsonl", "notes/n.md"]
    for tree in trees(git_repo, sha):
        with tree:
            assert tree.linked(asked) == {"tasks/link.jsonl", "linked/real.jsonl"}, tree.label
            assert tree.symlinks(["tasks"]) == ["tasks/link.jsonl"], tree.label
            assert tree.symlinks(["."]) == ["linked", "tasks/link.jsonl"], tree.label


def test_materialize_writes_the_document_and_its_sources_only(
    git_repo: Path, tmp_path: Path
) -> None:
    doc = "---\ntraining:\n  sources:\n    - path: ../shared\n---\n"
    sha = commit_files(git_repo, {"d/d.dlm": doc, "shared/s.md": "s\n", "elsewhere/e.md": "e\n"})
    for where in (sha, Rev.INDEX):
        dest = tmp_path / str(where)
        with TreeAt(git_repo, where) as tree:
            assert tree.doc("d").materialize(dest) == (dest / "d/d.dlm", dest)
            assert tree.doc("elsewhere").materialize(tmp_path / "t2") is None
        written = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
        assert written == ["d/d.dlm", "shared/s.md"]
        assert (dest / ".git").is_dir()
    with TreeAt(git_repo, Rev.WORKTREE) as tree:  # read in place, nothing written
        assert tree.doc("d").materialize(tmp_path / "w") == (git_repo / "d/d.dlm", git_repo)
    assert not (tmp_path / "w").exists()
    assert docat.materialize(git_repo, "d", sha, tmp_path / "m") == tmp_path / "m/d/d.dlm"


def test_many_documents_cost_a_fixed_number_of_git_processes(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing once and reading in batches: 30 documents cost what 1 costs."""
    files = {f"d{i:02}/d.dlm": "---\n---\n" for i in range(30)}
    files.update({f"d{i:02}/dlm.lock": "{}" for i in range(30)})
    sha = commit_files(git_repo, files)
    git(git_repo, "add", "-A")

    def spent(where: Rev | str, count: int) -> int:
        started = []
        real = subprocess.Popen

        class Counting(real):  # type: ignore[misc,valid-type]
            def __init__(self, args: list[str], *rest: object, **kw: object) -> None:
                started.append(args)
                super().__init__(args, *rest, **kw)

        monkeypatch.setattr(subprocess, "Popen", Counting)
        try:
            with TreeAt(git_repo, where) as tree:
                docs = tree.docs(tree.documents()[:count])
                assert all(d.lock == b"{}" for d in docs) and len(docs) == count
        finally:
            monkeypatch.setattr(subprocess, "Popen", real)
        return len(started)

    for where in (Rev.INDEX, sha):
        assert spent(where, 30) == spent(where, 1) <= 2, where
