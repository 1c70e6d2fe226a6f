"""`dlm_git.revdoc`: which `.dlm` is a document's at a commit (the one room for it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dlm_git import revdoc


def commit(repo: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, "utf-8")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "docs"], cwd=repo, check=True)
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True)
    return out.stdout.decode().strip()


def test_only_a_single_direct_child_is_the_document(git_repo: Path) -> None:
    sha = commit(
        git_repo,
        {
            "d/a.dlm": "---\n---\n",
            "d/sub/nested.dlm": "---\n---\n",  # another document's, never this one's
            "two/x.dlm": "---\n---\n",
            "two/y.dlm": "---\n---\n",
            "none/notes.md": "text\n",
            "top.dlm": "---\n---\n",
        },
    )
    assert revdoc.the_dlm(git_repo, "d", sha) == "d/a.dlm"
    assert revdoc.the_dlm(git_repo, "d/sub", sha) == "d/sub/nested.dlm"
    assert revdoc.the_dlm(git_repo, "two", sha) is None
    assert revdoc.the_dlm(git_repo, "none", sha) is None
    assert revdoc.the_dlm(git_repo, ".", sha) == "top.dlm"
    assert revdoc.dlms_in(["dd/x.dlm", "d/x.dlm"], "d") == ["d/x.dlm"]


def test_materialize_writes_the_document_and_its_sources_only(
    git_repo: Path, tmp_path: Path
) -> None:
    doc = "---\ntraining:\n  sources:\n    - path: ../shared\n---\n"
    sha = commit(git_repo, {"d/d.dlm": doc, "shared/s.md": "s\n", "elsewhere/e.md": "e\n"})
    dest = tmp_path / "tree"
    assert revdoc.materialize(git_repo, "d", sha, dest) == dest / "d/d.dlm"
    written = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert written == ["d/d.dlm", "shared/s.md"]
    assert (dest / ".git").is_dir()
    assert revdoc.materialize(git_repo, "elsewhere", sha, tmp_path / "t2") is None
