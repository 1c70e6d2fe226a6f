"""A params.yaml training override changed without a retraining is a stale record: an
ERROR in the pre-commit hook and FAILED in `verify COMMIT` (check `params.training`,
docs/hooks.md and docs/verify.md); the same override trained with (`dvc repro`) passes
both.

On the hooks' real repository (`notes`, trained and committed by `dlm-git init` and
`dvc repro`, whose params.yaml holds `docs.notes.training: {}`): a real `git commit` of a
params.yaml that sets `docs.notes.training.learning_rate` is refused; committed past the
hook (`--no-verify`), `dlm-git verify` fails it naming the check; retrained, it goes
through and verifies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import dlm_git
from tests.support.gitrepo import git, head
from tests.support.hookrepo import DOC, MANIFEST, commit, passed, read, refused, repro, write

pytestmark = pytest.mark.slow

PARAMS = "params.yaml"
LR = "0.001"
"""Written as text: YAML reads `0.001` as a float; the manifest records 0.001."""


def set_learning_rate(repo: Path, value: str, stage: bool = True) -> None:
    data = yaml.safe_load(read(repo, PARAMS))
    assert data["docs"][DOC] == {"training": {}}, data
    data["docs"][DOC]["training"]["learning_rate"] = "PLACEHOLDER"
    text = yaml.safe_dump(data, sort_keys=False).replace("PLACEHOLDER", value)
    write(repo, PARAMS, text, stage=stage)


def check_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["name"] == name)


def verify_json(repo: Path, rev: str) -> tuple[int, dict[str, Any]]:
    proc = dlm_git(repo, "verify", rev, "--json")
    return proc.code, json.loads(proc.stdout)["documents"][0]


def test_a_changed_override_without_retraining_is_refused(repo: Path) -> None:
    before = head(repo)
    recorded = json.loads(read(repo, MANIFEST))["training_config"]["learning_rate"]
    set_learning_rate(repo, LR)
    said = refused(commit(repo), repo, before)
    assert (
        f"dlm-git: ERROR {DOC}: params.training: params.yaml docs.{DOC}.training sets"
        f" learning_rate {float(LR)!r} (it records {recorded!r})" in said
    ), said


def test_verify_fails_a_commit_made_past_the_hook(repo: Path) -> None:
    good = head(repo)
    set_learning_rate(repo, "1e-3")  # YAML 1.1 leaves it text: read as the schema reads it
    assert commit(repo, "--no-verify").returncode == 0
    code, report = verify_json(repo, head(repo))
    assert code == 1
    assert report["verdict"] == "FAILED"
    check = check_of(report, "params.training")
    assert check["state"] == "failed"
    assert "learning_rate '1e-3'" in check["detail"], check
    failed = [c["name"] for c in report["checks"] if c["state"] != "ok"]
    assert failed == ["params.training"], failed  # the check alone catches it

    code, honest = verify_json(repo, good)
    assert code == 0 and honest["verdict"] == "VERIFIED", honest
    assert check_of(honest, "params.training")["state"] == "ok"


def test_an_override_trained_with_passes_the_hook_and_verify(repo: Path) -> None:
    before = head(repo)
    set_learning_rate(repo, "1e-3", stage=False)
    repro(repo)
    assert json.loads(read(repo, MANIFEST))["training_config"]["learning_rate"] == 0.001
    git(repo, "add", "-A")
    said = passed(commit(repo), repo, before)
    assert "params.training" not in said, said
    code, report = verify_json(repo, head(repo))
    assert code == 0 and report["verdict"] == "VERIFIED", report
    check = check_of(report, "params.training")
    assert check["state"] == "ok" and check["detail"].startswith("1 setting(s)"), check
