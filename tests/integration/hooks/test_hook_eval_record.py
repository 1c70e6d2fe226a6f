"""The pre-commit hook judges a staged `eval.json` as `verify` judges a commit's
(`eval.binding`): a record left from before a retraining (it scores the old adapter) is
refused, the record the pipeline wrote for the staged adapter goes through, and a
document with no record at all is no finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.gitrepo import git, head
from tests.support.hookrepo import DOC, commit, passed, read, refused, write

pytestmark = pytest.mark.slow

EVAL = f"{DOC}/eval.json"
EVAL_METRICS = f"{DOC}/eval_metrics.json"


def test_a_retrained_adapter_staged_with_its_old_eval_record_is_refused(
    retrained_repo: Path,
) -> None:
    repo = retrained_repo
    before = head(repo)
    fresh = {rel: read(repo, rel) for rel in (EVAL, EVAL_METRICS)}  # what `dvc repro` wrote
    for rel in (EVAL, EVAL_METRICS):  # HEAD's record: it scores HEAD's adapter
        write(repo, rel, git(repo, "show", f"HEAD:{rel}").encode("utf-8"), stage=False)
    assert read(repo, EVAL) != fresh[EVAL]
    git(repo, "add", "-A")
    err = refused(commit(repo), repo, before)
    assert f"dlm-git: ERROR {DOC}: eval.binding: eval.json scores adapter " in err
    assert "re-run `dlm-git eval DOC`" in err

    for rel, data in fresh.items():
        write(repo, rel, data)
    passed(commit(repo), repo, before)


def test_a_staged_metrics_file_that_is_not_the_records_numbers_is_refused(
    repo: Path,
) -> None:
    before = head(repo)
    write(repo, EVAL_METRICS, read(repo, EVAL_METRICS).replace(b'"count": ', b'"count": 1'))
    err = refused(commit(repo), repo, before)
    assert "eval.binding: eval_metrics.json does not hold the numbers of eval.json" in err


def test_a_document_without_an_eval_record_is_no_finding(repo: Path) -> None:
    before = head(repo)
    git(repo, "rm", "-q", "--", EVAL, EVAL_METRICS)
    proc = commit(repo)
    passed(proc, repo, before)
    assert "eval.binding" not in proc.stderr
