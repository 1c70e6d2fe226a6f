"""The pre-commit hook starts one git child per question (issue 28): where the work tree,
HEAD and the state directory are is one `git rev-parse` (`gitio.toplevel_and_head` with
`statedir.ASK`, handed to `statedir.learn`), and the hash cache still lands in the state
directory git names, whichever directory of the work tree the hook runs in (the adapter's
files older than `statcache.RACY_NS`, so their hashes are kept). What is staged costs no
git child of its own: it is read from the index's and HEAD's listings, which the checks
take anyway (`pre_commit.staged_in`), so a retrained document's commit starts five git
children, one per question. git's own trace (`GIT_TRACE`) counts the children.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dlm_git.statcache import RACY_NS
from tests.support.cli import hook
from tests.support.gitrepo import git
from tests.support.hookrepo import DOC

pytestmark = pytest.mark.slow


def git_children(trace: Path) -> list[str]:
    """The git commands a process started, in order (`git <name>` of each trace line)."""
    return [
        line.split("built-in: ", 1)[1].split()[1]
        for line in trace.read_text("utf-8").splitlines()
        if "built-in: git " in line
    ]


@pytest.mark.parametrize("where", [".", DOC])
def test_one_rev_parse_names_the_work_tree_head_and_the_hash_cache_directory(
    retrained_repo: Path, tmp_path: Path, where: str
) -> None:
    repo = retrained_repo
    git(repo, "add", "-A")  # the retrained outputs: every check runs, the adapter is hashed
    cache = repo / ".git" / "dlm-git" / "hash-cache.json"
    cache.unlink(missing_ok=True)
    time.sleep(RACY_NS / 1e9 + 0.1)  # the copied files are past racily clean: recorded
    trace = tmp_path / "trace"
    result = hook(repo / where, "pre_commit", GIT_TRACE=str(trace))
    assert result.code == 0, result.stderr
    children = git_children(trace)
    assert children.count("rev-parse") == 1, children
    assert cache.is_file(), "the adapter's hashes were not kept in git's state directory"
    assert sorted(p.name for p in repo.rglob("hash-cache.json")) == ["hash-cache.json"]


def test_a_retrained_documents_commit_asks_git_five_questions(
    retrained_repo: Path, tmp_path: Path
) -> None:
    """Where (`rev-parse`), the index and HEAD listed (`ls-files`, `ls-tree`: what is
    staged is their difference, no `diff-index`), the records read by id (one `cat-file
    --batch`), and `dlm-git.requireSignature` (`config`)."""
    git(retrained_repo, "add", "-A")
    trace = tmp_path / "trace"
    result = hook(retrained_repo, "pre_commit", GIT_TRACE=str(trace))
    assert result.code == 0, result.stderr
    children = git_children(trace)
    assert sorted(children) == ["cat-file", "config", "ls-files", "ls-tree", "rev-parse"], children
