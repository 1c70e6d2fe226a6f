"""Task files where a document may put them, judged the same way everywhere.

The repository: the verified one, its document given two lm-evaluation-harness tasks
(`tests/support/evaltasks.py`): the multiple-choice task in `evals/` at the repository
root (a directory documents share, named `../evals/mc.yaml`), the generation task in the
document's own `evals/`; `dlm-git init`, `dvc repro`, commit. `verify --level replay`
writes every file the commit's `eval.json` names into its replay tree, from the commit's
blobs, so the re-run evaluation finds the root task as the evaluation did. A task file
that is a symbolic link is refused alike by `verify --worktree`, the pre-commit hook,
`verify COMMIT` and `dlm-git eval` itself.

Replays are the CLI in this process (tests/support/verdicts.py); `dlm-git eval`'s refusal,
one line on a user's terminal, is the real executable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dlm_git.eval.record import metrics_of
from dlm_git.hashing import sha256_bytes
from tests.support.env import run
from tests.support.evaltasks import GEN_TASK, MC_TASK, name_tasks, write_tasks
from tests.support.forger import Forge
from tests.support.gitrepo import commit_all, git, head
from tests.support.verdicts import Result, assert_caught, assert_verified, call_main_in
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

EVAL = f"{DOC}/eval.json"
METRICS = f"{DOC}/eval_metrics.json"
ROOT_DATA = "evals/mc.jsonl"
DOC_DATA = f"{DOC}/evals/gen.jsonl"


@pytest.fixture(scope="module")
def shared_tasks(verified_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verified repository, its document evaluated on a root task and its own task."""
    root = copy_repo(verified_repo, tmp_path_factory.mktemp("root-tasks") / "repo")
    write_tasks(root)  # evals/ at the repository root
    write_tasks(root / DOC)
    for rel in (
        "evals/gen.yaml",
        "evals/gen.jsonl",
        f"{DOC}/evals/mc.yaml",
        f"{DOC}/evals/mc.jsonl",
    ):
        (root / rel).unlink()
    name_tasks(root / DOC / f"{DOC}.dlm", ["../evals/mc.yaml", "evals/gen.yaml"])
    run(["dlm-git", "init", "--no-hooks"], root)  # the task files are the inputs stage's
    run(["dvc", "repro"], root)
    commit_all(root, "a task at the repository root, one in the document's directory")
    return root


@pytest.fixture
def forge(shared_tasks: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> Forge:
    root = tmp_path / "repo"
    shutil.copytree(shared_tasks, root, symlinks=True)
    return Forge(root, call_main_in(root, capfd))


def eval_replay(result: Result) -> dict[str, str]:
    return result.check("eval.replay")


# --------------------------------------------------------------------------- the replay tree


def test_a_task_at_the_repository_root_is_re_run_to_the_same_bytes(forge: Forge) -> None:
    tasks = forge.read_json(EVAL)["tasks"]
    assert tasks[MC_TASK]["task_file"] == "evals/mc.yaml"
    assert tasks[MC_TASK]["data_sha256"].keys() == {ROOT_DATA}
    assert tasks[GEN_TASK]["task_file"] == f"{DOC}/evals/gen.yaml"
    assert_verified(forge.verify("HEAD"))
    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.code == 0 and result.verdict == "BITWISE", result.explain()
    assert eval_replay(result)["state"] == "ok", result.explain()


def test_root_task_data_changed_and_rebound_is_caught_by_the_re_run(forge: Forge) -> None:
    """A forger drops a row of the root task's data and re-binds its digest: the hash
    level cannot tell; the re-run evaluation reads the committed data (not a missing
    file) and finds other task results. Task results alone are CANNOT_VERIFY (the record
    does not pin datasets, pyarrow, jinja2), never a pass."""
    rows = forge.read(ROOT_DATA).splitlines(keepends=True)
    forge.write(ROOT_DATA, b"".join(rows[1:]))
    record = forge.read_json(EVAL)
    record["tasks"][MC_TASK]["data_sha256"][ROOT_DATA] = sha256_bytes(forge.read(ROOT_DATA))
    forge.write_canonical(EVAL, record)
    forge.write_canonical(METRICS, metrics_of(record))
    forge.commit("fewer rows, the old scores")
    assert_verified(forge.verify("HEAD"))
    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.verdict == "CANNOT_VERIFY", result.explain()
    check = eval_replay(result)
    assert check["state"] == "absent", result.explain()
    assert f"differs from eval.json at 'tasks.{MC_TASK}." in check["detail"], result.explain()


# --------------------------------------------------------------------------- links


def _link_data(forge: Forge, rel: str) -> None:
    """Replace task data `rel` with a link to a copy of the same bytes beside it."""
    path = forge.root / rel
    copy = path.with_name("copy-" + path.name)
    copy.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(copy.name)


def _linked(result: Result, rel: str) -> None:
    assert_caught(result, "eval.binding")
    detail = result.check("eval.binding")["detail"]
    assert f"'{rel}' is a symbolic link or lies under one" in detail, result.explain()


@pytest.mark.parametrize("rel", [DOC_DATA, ROOT_DATA])
def test_a_linked_task_file_is_refused_in_the_work_tree_as_in_the_commit(
    forge: Forge, rel: str
) -> None:
    _link_data(forge, rel)  # the same bytes: only the link differs
    _linked(forge.verify("--worktree", "--doc", DOC), rel)  # before it is committed
    forge.commit("a linked task file")
    _linked(forge.verify("HEAD"), rel)


def test_the_pre_commit_hook_refuses_a_linked_task_file(forge: Forge) -> None:
    run(["dlm-git", "hooks", "install"], forge.root)
    before = head(forge.root)
    _link_data(forge, DOC_DATA)
    git(forge.root, "add", "-A")
    proc = run(["git", "commit", "-q", "-m", "linked"], forge.root, check=False)
    assert proc.returncode == 1 and head(forge.root) == before, proc.stderr
    assert f"eval.binding: task '{GEN_TASK}': '{DOC_DATA}' is a symbolic link" in proc.stderr


def test_the_pre_commit_hook_judges_a_document_when_only_its_root_task_data_is_staged(
    forge: Forge,
) -> None:
    """A task shared from outside the document's directory is still the document's: an
    edit staged alone re-checks it, and the stale record is refused before the commit."""
    run(["dlm-git", "hooks", "install"], forge.root)
    before = head(forge.root)
    data = forge.root / ROOT_DATA
    data.write_bytes(data.read_bytes().splitlines(keepends=True)[0])
    git(forge.root, "add", ROOT_DATA)
    proc = run(["git", "commit", "-q", "-m", "fewer rows"], forge.root, check=False)
    assert proc.returncode == 1 and head(forge.root) == before, proc.stderr
    assert f"eval.binding: task '{MC_TASK}': '{ROOT_DATA}' has sha256" in proc.stderr


def test_dlm_git_eval_refuses_a_linked_task_file_in_one_line(forge: Forge) -> None:
    old = forge.read(EVAL)
    _link_data(forge, ROOT_DATA)
    proc = run(["dlm-git", "eval", DOC], forge.root, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and ROOT_DATA in lines[0] and "hint:" in lines[0], proc.stderr
    assert "is a symbolic link or lies under one" in lines[0], proc.stderr  # not "missing"
    assert forge.read(EVAL) == old
    assert json.loads(old)["tasks"]
