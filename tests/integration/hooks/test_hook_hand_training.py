"""A training by hand in a DVC project: what the hook says and what fixes it.

`dlm-git train` writes the records and the adapter but not dvc.lock, so the hook refuses
the commit and names the fix that works there (`dvc commit`, or `dvc repro`), never
`dlm-git train` alone, and the eval record's own fix (`dlm-git eval`); doing what they
say lets the commit through. Nothing the training
wrote but the records (and no weight file) is staged by `git add -A`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.hooks.test_hook_stale_records import PIPELINE_FIX
from tests.support.env import VENV_BIN, run
from tests.support.gitrepo import git, head
from tests.support.hookrepo import DLM, DOC, commit, edit_dlm, passed, read, refused, write

pytestmark = pytest.mark.slow


def test_a_hand_training_is_committed_by_the_fix_the_hook_names(repo: Path) -> None:
    before = head(repo)
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")), stage=False)
    train = [VENV_BIN / "dlm-git", "train", DOC, "--tiny-dir", "bases/tiny", "-q"]
    run([*train, "--device", "cpu", "--threads", "2"], repo)
    git(repo, "add", "-A")
    staged = git(repo, "diff", "--cached", "--name-only").split()
    assert not [p for p in staged if "/adapter/" in p or p.endswith(".safetensors")], staged

    err = refused(commit(repo), repo, before)
    findings = [ln for ln in err.splitlines() if ln.startswith("dlm-git: ERROR")]
    records = [ln for ln in findings if f"{DOC}: eval.binding: " not in ln]
    assert records, err
    assert all(ln.endswith(f"({PIPELINE_FIX})") for ln in records), err
    assert "(or `dlm-git train`)" not in err
    # the document's eval record scores the adapter before the training: its own fix
    (stale,) = [ln for ln in findings if ln not in records]
    assert stale.endswith(
        "(re-run `dlm-git eval DOC` (or `dvc repro eval@DOC`) and stage"
        " eval.json and eval_metrics.json)"
    ), err

    run([VENV_BIN / "dvc", "commit", "-f", "-q", f"train@{DOC}"], repo)
    run([VENV_BIN / "dlm-git", "eval", DOC, "--tiny-dir", "bases/tiny"], repo)
    git(repo, "add", "-A")
    passed(commit(repo), repo, before)
