"""Eval record forgeries (`eval.json`, `eval_metrics.json`): each is a commit an attacker
could make, and each must fail `dlm-git verify` at the hash level, caught by
`eval.binding`; an honest record, and a commit with none, must verify.

The repository: the verified one (commit A, whose pipeline evaluated it), then the
document given two lm-evaluation-harness tasks (`tests/support/evaltasks.py`) and one
more Q/A pair, and `dvc repro` (commit B: a new adapter, a record with tasks). Every
forgery is made on a copy of B. Where `dlm-git eval` does not record the harness's tasks
yet (`eval.run` writes `tasks: {}`), B adds the entry `eval.harness` writes for the
committed multiple-choice task (its files' digests; a score): what the hash level judges
of a task entry is those digests."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlm_git.eval.record import metrics_of
from dlm_git.hashing import canonical_json, float_hex, sha256_bytes
from tests.support.env import run
from tests.support.evaltasks import MC_TASK, name_tasks, write_tasks
from tests.support.forger import Forge
from tests.support.gitrepo import commit_all, git
from tests.support.verdicts import assert_caught, assert_verified, call_main_in
from tests.support.verified import DOC, copy_repo

pytestmark = pytest.mark.slow

EVAL = f"{DOC}/eval.json"
METRICS = f"{DOC}/eval_metrics.json"
A = "commit-a"
"""The tag of commit A, the verified repository's own (its record scores its adapter)."""
MORE_QA = """
### Q
Which record states what the adapter scores?

### A
eval.json, bound to the adapter and the manifest by their sha256.
"""


@pytest.fixture(scope="module")
def evaluated(verified_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Commit B: the verified repository retrained and re-evaluated with two tasks."""
    root = copy_repo(verified_repo, tmp_path_factory.mktemp("eval-forgery") / "repo")
    git(root, "tag", A)
    doc = root / DOC / f"{DOC}.dlm"
    doc.write_text(doc.read_text("utf-8").rstrip("\n") + "\n" + MORE_QA, "utf-8")
    name_tasks(doc, write_tasks(root / DOC))
    # the task files are inputs: `init` writes them into the `inputs` stage (dvc repro
    # refuses the stage until then, docs/pipeline.md)
    run(["dlm-git", "init", "--no-hooks"], root)
    run(["dvc", "repro"], root)
    commit_all(root, "evaluate with tasks")
    record = json.loads((root / EVAL).read_bytes())
    if not record["tasks"]:  # (until `eval.run` records the harness's tasks: see below)
        record["tasks"] = {MC_TASK: task_entry(root, "mc")}
        (root / EVAL).write_bytes(canonical_json(record))
        (root / METRICS).write_bytes(canonical_json(metrics_of(record)))
        commit_all(root, "the task entry the harness writes")
    return root


def task_entry(root: Path, name: str) -> dict[str, Any]:
    """A task's record entry as `eval.harness` writes it, naming the committed files."""
    files = {
        f"{DOC}/evals/{name}.{ext}": (root / DOC / "evals" / f"{name}.{ext}").read_bytes()
        for ext in ("yaml", "jsonl")
    }
    (task, task_bytes), (data, data_bytes) = files.items()
    settings = {"batch_size": 1, "num_fewshot": 0, "seed": 42, "limit": None}
    return {
        "task_file": task,
        "task_sha256": sha256_bytes(task_bytes),
        "include_sha256": {},
        "data_sha256": {data: sha256_bytes(data_bytes)},
        "harness": {"name": "lm-eval", "version": "0.4.13"},
        "settings": {**settings, "max_gen_toks": None, "bootstrap_iters": 0},
        "samples": 8,
        "metrics": {"acc,none": {"value": 0.375, "hex": float_hex(0.375)}},
    }


@pytest.fixture
def forge_b(evaluated: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> Forge:
    root = tmp_path / "repo"
    shutil.copytree(evaluated, root, symlinks=True)
    return Forge(root, call_main_in(root, capfd))


def edit_record(forge: Forge, change: Callable[[dict[str, Any]], None]) -> None:
    """Change eval.json in place (canonical JSON, as eval writes it)."""
    record = forge.read_json(EVAL)
    change(record)
    forge.write_canonical(EVAL, record)


def caught_by_eval(result: Any, words: str) -> None:
    assert_caught(result, "eval.binding")
    assert words in result.check("eval.binding")["detail"], result.explain()


def test_an_honest_record_with_tasks_verifies(forge_b: Forge) -> None:
    record = forge_b.read_json(EVAL)
    assert MC_TASK in record["tasks"]
    assert record["probes"], "the document's Q/A pairs give probes"
    result = forge_b.verify("HEAD")
    assert_verified(result)
    assert re.search(r"[1-9]\d* task\(s\)", result.check("eval.binding")["detail"])
    assert_verified(forge_b.verify("--worktree", "--doc", DOC))


def test_a_commit_without_a_record_verifies_and_says_not_evaluated(forge_b: Forge) -> None:
    forge_b.git("rm", "-q", "--", EVAL, METRICS)
    forge_b.commit("no eval record")
    result = forge_b.verify("HEAD")
    assert_verified(result)
    assert "eval.binding" not in [c["name"] for c in result.checks]
    assert "not evaluated (no eval.json)" in result.doc["notes"]


def test_a_record_moved_from_another_commit_fails(forge_b: Forge) -> None:
    for rel in (EVAL, METRICS):  # commit A's record: it scores A's adapter
        forge_b.write(rel, forge_b.git("show", f"{A}:{rel}").encode("utf-8"))
    forge_b.commit("an older record")
    caught_by_eval(forge_b.verify("HEAD"), "eval.json scores adapter ")


def test_a_record_rebound_to_the_adapter_but_made_against_another_manifest_fails(
    forge_b: Forge,
) -> None:
    old = json.loads(forge_b.git("show", f"{A}:{EVAL}"))
    old["adapter_sha256"] = forge_b.read_json(EVAL)["adapter_sha256"]
    forge_b.write_canonical(EVAL, old)
    forge_b.commit("rebound adapter sha")
    caught_by_eval(forge_b.verify("HEAD"), "was made against manifest.json ")


def test_task_data_swapped_after_evaluation_fails(forge_b: Forge) -> None:
    data = f"{DOC}/evals/mc.jsonl"
    rows = forge_b.read(data).decode("utf-8").splitlines(keepends=True)
    forge_b.write(data, "".join(reversed(rows)).encode("utf-8"))
    forge_b.commit("other task data")
    caught_by_eval(forge_b.verify("HEAD"), "demo/evals/mc.jsonl' has sha256 ")
    # the work tree is judged the same way
    caught_by_eval(forge_b.verify("--worktree", "--doc", DOC), "that was evaluated")


def test_a_task_file_edited_after_evaluation_fails(forge_b: Forge) -> None:
    task = f"{DOC}/evals/mc.yaml"
    forge_b.write(task, forge_b.read(task).replace(b"Answer:", b"Reply:"))
    forge_b.commit("other task definition")
    caught_by_eval(forge_b.verify("HEAD"), "demo/evals/mc.yaml' has sha256 ")


def test_an_edited_task_score_fails(forge_b: Forge) -> None:
    def better(record: dict[str, Any]) -> None:
        record["tasks"][MC_TASK]["metrics"]["acc,none"]["value"] = 1.0

    edit_record(forge_b, better)
    forge_b.commit("a better score")
    caught_by_eval(forge_b.verify("HEAD"), "is not its bits")


def test_an_edited_exact_match_fails(forge_b: Forge) -> None:
    def matched(record: dict[str, Any]) -> None:
        probe = record["probes"][0]
        probe["exact_match"] = not probe["exact_match"]

    edit_record(forge_b, matched)
    forge_b.commit("a probe that matched")
    caught_by_eval(forge_b.verify("HEAD"), "probes[0].exact_match")


def test_an_edited_metrics_file_fails(forge_b: Forge) -> None:
    metrics = forge_b.read_json(METRICS)
    metrics["probes"]["exact_match"] = 1.0
    forge_b.write_canonical(METRICS, metrics)
    forge_b.commit("better metrics")
    caught_by_eval(forge_b.verify("HEAD"), "eval_metrics.json does not hold the numbers")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"{", "eval.json is not valid JSON"),
        (b'{"eval_version": 1, "eval_version": 1}', "duplicate key"),
        (b"[" * 100_000, "eval.json is not valid JSON"),
        (b'{"eval_version": 1}', "malformed eval.json: adapter_sha256: missing"),
        (b'{"eval_version": true}', "malformed eval.json"),
    ],
    ids=["truncated", "duplicate-key", "deep", "missing-field", "bool-version"],
)
def test_a_malformed_record_fails_in_one_line(forge_b: Forge, data: bytes, words: str) -> None:
    forge_b.write(EVAL, data)
    forge_b.commit("malformed record")
    caught_by_eval(forge_b.verify("HEAD"), words)


def test_a_record_of_a_newer_version_cannot_be_verified(forge_b: Forge) -> None:
    edit_record(forge_b, lambda record: record.update(eval_version=2))
    forge_b.commit("a newer record")
    result = forge_b.verify("HEAD")
    assert result.verdict == "CANNOT_VERIFY", result.explain()
    check = result.check("eval.binding")
    assert check["state"] == "absent" and "upgrade dlm-git" in check["detail"]
    assert git(forge_b.root, "status", "--porcelain") == ""


# --------------------------------------------------------------------------- replay level


def test_a_clean_replay_re_runs_the_evaluation_to_the_same_bytes(forge: Forge) -> None:
    result = forge.verify_here("HEAD", "--level", "replay")
    assert result.code == 0 and result.verdict == "BITWISE", result.explain()
    assert result.check("eval.replay")["state"] == "ok", result.explain()


def test_an_edited_probe_answer_passes_the_hash_level_but_fails_the_replay(
    forge: Forge,
) -> None:
    def answered(record: dict[str, Any]) -> None:
        probe = record["probes"][0]
        assert not probe["exact_match"], "the tiny adapter does not answer its probe"
        probe["generated"] = probe["reference"]  # the right answer, and a better score
        probe["exact_match"] = True

    edit_record(forge, answered)
    forge.write_canonical(METRICS, metrics_of(forge.read_json(EVAL)))
    forge.commit("a better answer")
    assert_verified(forge.verify("HEAD"))  # consistent: only running the model tells
    result = forge.verify_here("HEAD", "--level", "replay")
    assert_caught(result, "eval.replay")
    assert "probes[0]." in result.check("eval.replay")["detail"], result.explain()
    assert "bit equality expected" in result.check("eval.replay")["detail"]


def test_another_adapters_scores_rebound_to_this_commit_fail_the_replay(
    forge_b: Forge,
) -> None:
    here = forge_b.read_json(EVAL)
    old = json.loads(forge_b.git("show", f"{A}:{EVAL}"))  # commit A's scores
    old["adapter_sha256"], old["manifest_sha256"] = here["adapter_sha256"], here["manifest_sha256"]
    forge_b.write_canonical(EVAL, old)
    forge_b.write_canonical(METRICS, metrics_of(old))
    forge_b.commit("scores of another adapter, fixed up")
    assert_verified(forge_b.verify("HEAD"))
    result = forge_b.verify_here("HEAD", "--level", "replay")
    assert_caught(result, "eval.replay")
