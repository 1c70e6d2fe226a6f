"""Every line the pre-commit hook prints for a finding names its check by its stable id
(`dlm-git: ERROR <doc>: <check id>: <what> (<fix>)`, as git fsck prints `error in commit
X: badDate: ...`), that id is a row of the check table (`contract.table.RULES`), and
`git config dlm-git.<that id> warn` turns that very finding into a WARN: the key a user
sets is read from the message they meet (docs/hooks.md, "Severities").

On the hooks' real repository: the commit is made with `git commit`, each key is tried
with `git hook run pre-commit` (the installed hook, as git runs it, on the same index),
then, every key set, `git commit` goes through with nothing but warnings.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dlm_git.contract.table import RULES
from dlm_git.hashing import canonical_json
from tests.support.env import run
from tests.support.gitrepo import git, head
from tests.support.hookrepo import (
    DLM,
    LOCK,
    commit,
    edit_dlm,
    passed,
    read,
    refused,
    stage_other_adapter,
    write,
)

pytestmark = pytest.mark.slow

FINDING = re.compile(r"dlm-git: (ERROR|WARN) ([^:]+): ([^:\s]+): (.+)")
"""A finding line: level, document, check id, what and fix."""

Finding = tuple[str, str, str, str]


def findings(stderr: str) -> list[Finding]:
    """(level, doc, check id, rest) of every finding line; a line that starts as a
    finding does but names no check fails here."""
    out = []
    for line in stderr.splitlines():
        if line.startswith(("dlm-git: ERROR ", "dlm-git: WARN ")):
            match = FINDING.fullmatch(line)
            assert match is not None, f"a finding that names no check: {line}"
            level, doc, check, rest = match.groups()
            out.append((level, doc, check, rest))
    return out


def hook(repo: Path) -> subprocess.CompletedProcess[str]:
    """The installed pre-commit hook on the index, run by git (`git hook run`)."""
    return run(["git", "hook", "run", "pre-commit"], repo, check=False)


def broken_records(repo: Path) -> None:
    """Records and pipeline broken at once: the `.dlm` edited without retraining, the lock's
    base digest edited without re-binding the manifest, the document dropped from
    params.yaml's `documents:`."""
    write(repo, DLM, edit_dlm(read(repo, DLM).decode("utf-8")))
    lock = json.loads(read(repo, LOCK))
    lock["base_model_sha256"] = "1" * 64
    write(repo, LOCK, canonical_json(lock))
    params = yaml.safe_load(read(repo, "params.yaml"))
    params["documents"] = []
    write(repo, "params.yaml", yaml.safe_dump(params, sort_keys=False))


def another_adapter(repo: Path) -> None:
    """HEAD's inputs and lock, the retrained adapter recorded consistently: only the
    determinism check objects (an ERROR: the profile promises bits)."""
    stage_other_adapter(repo)


CASES: dict[str, tuple[str, Callable[[Path], None], set[str]]] = {
    "records": (
        "repo",
        broken_records,
        {"doc.sha256", "lock.binding", "lock.fields", "lock.drift", "pipeline.documents"},
    ),
    "determinism": ("retrained_repo", another_adapter, {"determinism"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_finding_names_its_check_and_its_key_makes_it_a_warn(
    case: str, request: pytest.FixtureRequest
) -> None:
    fixture, forge, expected = CASES[case]
    repo: Path = request.getfixturevalue(fixture)
    forge(repo)
    before = head(repo)
    found = findings(refused(commit(repo), repo, before))
    assert {check for _, _, check, _ in found} >= expected, found
    assert all(check in RULES for _, _, check, _ in found), found
    errors = sorted({check for level, _, check, _ in found if level == "ERROR"})
    for check in errors:
        git(repo, "config", f"dlm-git.{check}", "warn")
        now = findings(hook(repo).stderr)
        assert now == [
            ("WARN" if c == check else level, doc, c, rest) for level, doc, c, rest in found
        ], (check, now)
        git(repo, "config", "--unset", f"dlm-git.{check}")
    for check in errors:
        git(repo, "config", f"dlm-git.{check}", "warn")
    after = findings(passed(commit(repo), repo, before))
    assert after == [("WARN", doc, c, rest) for _, doc, c, rest in found]
