"""`eval.replay`'s replay tree gets every file a commit's `eval.json` names, wherever in
the repository it lies, from the commit's blobs by the rule `eval.binding` judges them
by (`evalbinding.task_files`): a repository path, no link nor below one, the recorded
sha256. What cannot be placed is a reason (the check is then CANNOT_VERIFY), never a
file written through a link or over one the replay wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlm_git.hashing import canonical_json, sha256_bytes
from dlm_git.verify.eval_replay import place_task_files
from tests.support.gitrepo import commit_all, write_files

TASK = "task: t\n"
DATA = '{"q": 1}\n'


def record(task_file: str = "tasks/t.yaml", data: str = "tasks/t.jsonl") -> bytes:
    """An `eval.json` of one task naming `task_file` and `data` (their committed bytes)."""
    entry: dict[str, Any] = {
        "task_file": task_file,
        "task_sha256": sha256_bytes(TASK.encode()),
        "include_sha256": {},
        "data_sha256": {data: sha256_bytes(DATA.encode())},
        "harness": {"name": "lm-eval", "version": "0.4.13"},
        "settings": {},
        "samples": 1,
        "metrics": {},
    }
    return canonical_json(
        {
            "eval_version": 1,
            "adapter_sha256": "0" * 64,
            "manifest_sha256": "0" * 64,
            "numerics": {"profile": "native", "threads": 1, "device": "cpu"},
            "settings": {},
            "val": None,
            "probes": [],
            "tasks": {"t": entry},
        }
    )


def test_task_files_outside_the_document_are_written_from_the_commit(
    git_repo: Path, tmp_path: Path
) -> None:
    write_files(git_repo, {"tasks/t.yaml": TASK, "tasks/t.jsonl": DATA, "doc/d.dlm": "x\n"})
    sha = commit_all(git_repo, "tasks at the root")
    (git_repo / "tasks" / "t.jsonl").write_text("the work tree's, not the commit's\n")
    tree = tmp_path / "tree"
    (tree / "doc").mkdir(parents=True)
    assert place_task_files(git_repo, sha, record(), tree) is None
    assert (tree / "tasks" / "t.yaml").read_text() == TASK
    assert (tree / "tasks" / "t.jsonl").read_text() == DATA
    assert place_task_files(git_repo, sha, record(), tree) is None  # already there: kept


def test_what_cannot_be_placed_is_a_reason_and_nothing_is_overwritten(
    git_repo: Path, tmp_path: Path
) -> None:
    write_files(git_repo, {"tasks/t.yaml": TASK, "real/t.jsonl": DATA})
    (git_repo / "tasks" / "t.jsonl").symlink_to("../real/t.jsonl")
    sha = commit_all(git_repo, "a linked data file")
    tree = tmp_path / "tree"
    why = place_task_files(git_repo, sha, record(), tree)
    assert why is not None and "'tasks/t.jsonl' is a symbolic link" in why
    assert not (tree / "tasks" / "t.jsonl").exists()

    (tree / "real").mkdir(parents=True)
    (tree / "real" / "t.jsonl").write_text("what the replay wrote\n")
    why = place_task_files(git_repo, sha, record(data="real/t.jsonl"), tree)
    assert why == "task file 'real/t.jsonl' is also a file the replay wrote"
    assert (tree / "real" / "t.jsonl").read_text() == "what the replay wrote\n"

    why = place_task_files(git_repo, sha, record(data="../t.jsonl"), tree)
    assert why is not None and "not a repository path" in why
