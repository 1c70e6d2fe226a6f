"""Per-document settings as DVC params, on a real repository with two documents:
`docs.<doc>.training.<setting>` overrides the document's setting for that document only
(`dvc exp run -S`), the effective value is recorded and replays, a key nothing reads is
refused in one line, `docs.<doc>.lock_mode` touches one document's stage, and the metrics
file holds no `final_loss_hex`.

One repository (`dlm-git init --doc a`, `--doc b`, each starter trained for 2 steps by
`dvc repro`, commit) per module; every test starts from that commit and puts it back
afterwards. What is checked here is which document's stages run and what they record, never
how long a training is: 2 steps make every training here (the build, the experiment, the
replays) cost its process start and little more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.docs import set_training
from tests.support.env import subprocess_env
from tests.support.gitrepo import git, init_repo

pytestmark = pytest.mark.slow

A, B = "a", "b"
LR = 0.01


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=repo,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stdout
    return proc.stdout


def dvc(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(repo, "-m", "dvc", *args)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    repo = tmp_path_factory.mktemp("params") / "repo"
    init_repo(repo)
    for doc in (A, B):
        ok(run(repo, "-m", "dlm_git", "init", "--doc", doc, "--no-hooks"))
        dlm = repo / doc / f"{doc}.dlm"
        dlm.write_text(set_training(dlm.read_text("utf-8"), max_steps=2), "utf-8")
    ok(dvc(repo, "repro"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two documents, trained")
    return repo, git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def repo(committed: tuple[Path, str]) -> Iterator[Path]:
    path, commit = committed
    try:
        yield path
    finally:
        git(path, "reset", "-q", "--hard", commit)
        git(path, "clean", "-fdq")
        ok(dvc(path, "checkout", "--force"))


def test_init_gives_each_document_a_params_entry(repo: Path) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text("utf-8"))
    assert params["docs"] == {A: {"training": {}}, B: {"training": {}}}
    status = ok(dvc(repo, "status"))
    assert "train@" not in status and "verify@" not in status, status


def test_metrics_file_holds_no_hex_loss(repo: Path) -> None:
    metrics = read_json(repo / A / "metrics.json")
    manifest = read_json(repo / A / "manifest.json")
    assert "final_loss_hex" not in metrics
    assert float.fromhex(manifest["training"]["final_loss_hex"]) == metrics["final_loss"]
    shown = ok(dvc(repo, "metrics", "show"))
    assert "final_loss_hex" not in shown and "final_loss" in shown


def test_exp_run_setting_retrains_that_document_only(repo: Path) -> None:
    before_b = (repo / B / "manifest.json").read_bytes()
    out = ok(dvc(repo, "exp", "run", "-S", f"+docs.{A}.training.learning_rate={LR}"))
    assert f"Running stage 'train@{A}'" in out, out
    assert f"Running stage 'train@{B}'" not in out, out
    manifest = read_json(repo / A / "manifest.json")
    assert manifest["training_config"]["learning_rate"] == LR  # the effective value
    assert (repo / B / "manifest.json").read_bytes() == before_b

    shown = json.loads(ok(dvc(repo, "exp", "show", "--json")))
    data = json.dumps(shown)
    assert f'"learning_rate": {LR}' in data and '"final_loss"' in data

    # a commit of the experiment replays under the commit's own params.yaml
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "lr experiment")
    verdict = run(repo, "-m", "dlm_git", "verify", "HEAD", "--level", "replay", "--doc", A)
    assert verdict.returncode == 0 and "BITWISE" in verdict.stdout, verdict.stdout


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (f"+docs.{A}.training.learnig_rate={LR}", f"docs.{A}.training.learnig_rate"),
        (f"+docs.{A}.learning_rate={LR}", f"docs.{A}.learning_rate"),
        (f"+docs.{A}.training.sources=[]", f"docs.{A}.training.sources"),
        (f"docs.{A}.training=7", f"docs.{A}.training"),
        (f"+docs.{A}.training.lora_r=0", f"docs.{A}.training.lora_r"),
    ],
)
def test_a_key_nothing_reads_is_refused(repo: Path, setting: str, named: str) -> None:
    before = (repo / A / "manifest.json").read_bytes()
    proc = dvc(repo, "exp", "run", "-S", setting)
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"params.yaml: {named}:")]
    assert len(lines) == 1 and "hint:" in lines[0], proc.stdout
    assert "Traceback" not in proc.stdout
    assert (repo / A / "manifest.json").read_bytes() == before


def test_lock_mode_for_one_document_touches_only_its_stage(repo: Path) -> None:
    path = repo / "params.yaml"
    params = yaml.safe_load(path.read_text("utf-8"))
    params["docs"][A]["lock_mode"] = "update"
    path.write_text(yaml.safe_dump(params, sort_keys=False), "utf-8")
    status = ok(dvc(repo, "status"))
    assert f"train@{A}:" in status, status
    assert f"train@{B}" not in status, status


def test_replay_ignores_what_an_older_dlm_git_ignored(repo: Path) -> None:
    # `-S +training.learning_rate=...` under an older dlm-git wrote a key no training read:
    # its commit is honest, and its replay judges the document's own entry only
    path = repo / "params.yaml"
    path.write_text(path.read_text("utf-8") + "training:\n  learning_rate: 0.5\n", "utf-8")
    git(repo, "commit", "-q", "-am", "a top-level key, as `-S +training...` wrote it")
    refused = run(repo, "-m", "dlm_git", "train", A, "--tiny-dir", "bases/tiny")
    assert refused.returncode == 1 and "params.yaml: training:" in refused.stdout
    verdict = run(repo, "-m", "dlm_git", "verify", "HEAD", "--level", "replay", "--doc", A)
    assert verdict.returncode == 0 and "BITWISE" in verdict.stdout, verdict.stdout
