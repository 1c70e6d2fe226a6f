"""Two documents with one `dlm_id` (the original tool keys its store by it) are refused:
an ERROR in the pre-commit hook, FAILED in `verify COMMIT` and so on push (check
`docset.dlm_id`, docs/hooks.md and docs/verify.md).

On the hooks' real repository (`notes`, trained and committed): a second document whose
`.dlm` copies `notes`'s id is refused by a real `git commit`, whatever the id's case; the
same document made by `dlm-git new` (a fresh ULID) goes through. Committed past the hook
(`--no-verify`), `dlm-git verify` fails the commit naming the check, and the push is
refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import dlm_git
from tests.support.env import run
from tests.support.gitrepo import git, head
from tests.support.hookrepo import DLM, DOC, commit, passed, read, refused, write

pytestmark = pytest.mark.slow

OTHER = "other/other.dlm"


def dlm_id(text: str) -> str:
    found = re.search(r"(?m)^dlm_id: (\S+)$", text)
    assert found is not None, text
    return found.group(1)


def copy_of_notes_id(repo: Path, case: str = "upper") -> str:
    """A starter document at OTHER (`dlm-git new`) given the `dlm_id` of `notes`."""
    dlm_git(repo, "new", OTHER, check=True)
    taken = dlm_id(read(repo, DLM).decode("utf-8"))
    text = read(repo, OTHER).decode("utf-8")
    copied = taken.lower() if case == "lower" else taken
    write(repo, OTHER, text.replace(dlm_id(text), copied))
    return taken


@pytest.mark.parametrize("case", ["upper", "lower"])
def test_a_second_document_with_the_same_dlm_id_is_refused(repo: Path, case: str) -> None:
    before = head(repo)
    taken = copy_of_notes_id(repo, case)
    said = refused(commit(repo), repo, before)
    assert (
        f"dlm-git: ERROR other: docset.dlm_id: dlm_id {taken} is also the dlm_id of {DLM}"
        " (give one of them a fresh dlm_id" in said
    ), said
    assert f"dlm-git: ERROR {DOC}: docset.dlm_id: dlm_id {taken} is also the dlm_id of {OTHER}" in (
        said
    ), said


def test_a_document_from_dlm_git_new_has_its_own_id(repo: Path) -> None:
    before = head(repo)
    out = dlm_git(repo, "new", OTHER, check=True).stdout
    fresh = dlm_id(read(repo, OTHER).decode("utf-8"))
    assert out == f"dlm-git new: created {OTHER} (dlm_id {fresh})\n"
    assert fresh != dlm_id(read(repo, DLM).decode("utf-8"))
    git(repo, "add", OTHER)
    said = passed(commit(repo), repo, before)
    assert "docset.dlm_id" not in said, said
    assert "dlm-git: WARN other: doc.trained" in said, said


def test_verify_and_push_refuse_a_commit_made_past_the_hook(repo: Path, tmp_path: Path) -> None:
    good = head(repo)
    taken = copy_of_notes_id(repo)
    assert commit(repo, "--no-verify").returncode == 0
    bad = head(repo)

    proc = dlm_git(repo, "verify", bad, "--json")
    assert proc.code == 1, (proc.stdout, proc.stderr)
    reports = {d["doc"]: d for d in json.loads(proc.stdout)["documents"]}
    assert reports[DOC]["verdict"] == "FAILED"
    check = next(c for c in reports[DOC]["checks"] if c["name"] == "docset.dlm_id")
    assert check["state"] == "failed"
    assert check["detail"].startswith(f"dlm_id {taken} is also the dlm_id of {OTHER} (hint: ")

    honest = json.loads(dlm_git(repo, "verify", good, "--json").stdout)["documents"][0]
    assert next(c for c in honest["checks"] if c["name"] == "docset.dlm_id")["state"] == "ok"

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    proc = run(["git", "push", "-q", "origin", "HEAD:main"], repo, check=False)
    assert proc.returncode != 0
    assert f"dlm-git: ERROR {DOC}@{bad[:12]}: FAILED" in proc.stderr, proc.stderr
    assert "push refused" in proc.stderr
