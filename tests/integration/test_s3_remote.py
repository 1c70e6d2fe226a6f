"""A real S3 remote and an auditor on another machine (issue: scale-out).

A moto S3 server on 127.0.0.1 (tests/support/s3.py) stands in for the bucket; DVC talks
to it through dvc-s3 exactly as to AWS. The trainer's repository pushes; a fresh clone
elsewhere (its own DVC cache, the remote config inherited from `.dvc/config`) pulls and
verifies at the hash and the replay level; an object tampered with on the remote is
caught. Commands are subprocesses, the environment the remote needs on top, except the
replay, which trains in this process (tests/support/verdicts.py) after the pull.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import subprocess_env
from tests.support.gitrepo import git, init_repo
from tests.support.s3 import S3Server, s3_server
from tests.support.verdicts import call_main_in

pytestmark = pytest.mark.slow

DOC = "notes"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


def run(cwd: Path, s3: S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(**s3.env)
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def dvc(cwd: Path, s3: S3Server, *args: str) -> subprocess.CompletedProcess[str]:
    return run(cwd, s3, sys.executable, "-m", "dvc", *args)


def verify(cwd: Path, s3: S3Server, *args: str) -> dict[str, Any]:
    proc = run(cwd, s3, sys.executable, "-m", "dlm_git", "verify", "HEAD", "--json", *args)
    return json.loads(proc.stdout)["documents"][0]


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory, s3: S3Server) -> Path:
    """Trained with `dvc repro`, committed, and pushed to the S3 remote."""
    repo = init_repo(tmp_path_factory.mktemp("trainer") / "repo")
    ok(run(repo, s3, sys.executable, "-m", "dlm_git", "init", "--doc", DOC, "--no-hooks"))
    doc = repo / DOC / f"{DOC}.dlm"
    doc.write_text(doc.read_text("utf-8").replace("max_steps: 20", "max_steps: 2"), "utf-8")
    ok(dvc(repo, s3, "repro"))
    ok(dvc(repo, s3, "remote", "add", "-d", "storage", f"s3://{s3.bucket}/store"))
    ok(dvc(repo, s3, "remote", "modify", "storage", "endpointurl", s3.endpoint))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "trained; remote on S3")
    ok(dvc(repo, s3, "push"))
    return repo


def clone(trainer: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(trainer), str(dest)], check=True)
    return dest


def test_an_auditor_pulls_from_s3_and_verifies(
    trainer: Path,
    s3: S3Server,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert any(k.startswith("store/files/md5/") for k in s3.keys("store/")), s3.keys()
    auditor = clone(trainer, tmp_path / "auditor")
    before = verify(auditor, s3)
    assert before["verdict"] == "CANNOT_VERIFY", before  # a fresh clone has no DVC cache
    ok(dvc(auditor, s3, "pull"))
    after = verify(auditor, s3)
    assert after["verdict"] == "VERIFIED", after
    # the replay trains: in this process (tests/support/verdicts.py), the same environment
    for key, value in s3.env.items():
        monkeypatch.setenv(key, value)
    replay = call_main_in(auditor, capfd)(["verify", "HEAD", "--json", "--level", "replay"])
    assert replay.verdict == "BITWISE", replay.explain()


def test_an_object_tampered_with_on_the_remote_is_caught(
    trainer: Path, s3: S3Server, tmp_path: Path
) -> None:
    weights_md5 = _md5_of(trainer / DOC / "adapter" / "adapter_model.safetensors")
    key = f"store/files/md5/{weights_md5[:2]}/{weights_md5[2:]}"
    client = s3.client()
    original = client.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    forged = bytearray(original)
    forged[-1] ^= 1
    client.put_object(Bucket=s3.bucket, Key=key, Body=bytes(forged))
    try:
        auditor = clone(trainer, tmp_path / "auditor")
        # DVC (3.67, pinned) takes the object without re-hashing it (measured): dlm-git must not
        ok(dvc(auditor, s3, "pull"))
        report = verify(auditor, s3)
        assert report["verdict"] == "FAILED", report
        failed = [c["name"] for c in report["checks"] if not c["ok"]]
        assert failed[0] == "adapter.sha256", report
    finally:
        client.put_object(Bucket=s3.bucket, Key=key, Body=original)


def _md5_of(path: Path) -> str:
    import hashlib

    return hashlib.md5(path.read_bytes()).hexdigest()


def test_verify_fetch_brings_exactly_the_adapter(
    trainer: Path, s3: S3Server, tmp_path: Path
) -> None:
    auditor = clone(trainer, tmp_path / "auditor")
    report = verify(auditor, s3, "--fetch")
    assert report["verdict"] == "VERIFIED", report
    assert any("fetched from the DVC remote" in n for n in report["notes"]), report
    cached = {p.name for p in (auditor / ".dvc" / "cache").rglob("*") if p.is_file()}
    tokens = _out_md5(trainer, f"{DOC}/tokens")
    assert tokens[2:] not in cached  # only what the check needs
    again = verify(auditor, s3, "--fetch")  # everything cached now: nothing fetched
    assert again["verdict"] == "VERIFIED" and not any(
        "--fetch" in n for n in again.get("notes", [])
    )


def test_verify_fetch_without_a_remote_is_a_note_then_cannot_verify(
    trainer: Path, s3: S3Server, tmp_path: Path
) -> None:
    auditor = clone(trainer, tmp_path / "auditor")
    ok(dvc(auditor, s3, "remote", "modify", "storage", "url", f"s3://{s3.bucket}/elsewhere"))
    report = verify(auditor, s3, "--fetch")
    assert report["verdict"] == "CANNOT_VERIFY", report
    assert any("is not on the DVC remote" in n for n in report["notes"]), report


def _out_md5(repo: Path, path: str) -> str:
    import yaml

    lock = yaml.safe_load((repo / "dvc.lock").read_text("utf-8"))
    for stage in lock["stages"].values():
        for out in stage.get("outs", []):
            if out["path"] == path:
                return str(out["md5"])
    raise KeyError(path)


def test_verify_fetch_never_fetches_what_a_malformed_record_names(
    trainer: Path, s3: S3Server, tmp_path: Path
) -> None:
    auditor = clone(trainer, tmp_path / "auditor")
    md5 = _out_md5(auditor, f"{DOC}/adapter")
    lock = (auditor / "dvc.lock").read_text("utf-8").replace(md5, "../../../etc/passwd.dir")
    (auditor / "dvc.lock").write_text(lock, "utf-8")
    git(auditor, "commit", "-qam", "a hostile md5")
    report = verify(auditor, s3, "--fetch")
    assert report["verdict"] == "FAILED", report
    assert [c["name"] for c in report["checks"] if not c["ok"]] == ["dvc.binding"], report
    assert not any(n.startswith("--fetch") for n in report.get("notes", [])), report
    assert not (auditor / ".dvc" / "cache").exists() or not any(
        (auditor / ".dvc" / "cache").rglob("*.dir")
    )


def pre_push(repo: Path, s3: S3Server) -> subprocess.CompletedProcess[str]:
    sha = git(repo, "rev-parse", "HEAD").strip()
    line = f"refs/heads/main {sha} refs/heads/main {'0' * 40}\n"
    env = subprocess_env(**s3.env)
    return subprocess.run(
        [sys.executable, "-m", "dlm_git.hooks.pre_push", "origin", "x"],
        cwd=repo,
        input=line,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_pre_push_hook_refuses_adapters_that_are_not_on_the_remote(
    trainer: Path, s3: S3Server, tmp_path: Path
) -> None:
    import shutil

    proc = pre_push(trainer, s3)  # pushed to S3 by the fixture
    assert proc.returncode == 0 and "dlm-git" not in proc.stderr, proc.stderr
    repo = tmp_path / "work"
    shutil.copytree(trainer, repo, symlinks=True)
    doc = repo / DOC / f"{DOC}.dlm"
    doc.write_text(doc.read_text("utf-8").replace("max_steps: 2", "max_steps: 3"), "utf-8")
    ok(dvc(repo, s3, "repro"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "retrained, not pushed to the DVC remote")
    proc = pre_push(repo, s3)
    assert proc.returncode == 1, proc.stderr
    assert "adapter object(s) not on DVC remote 'storage'" in proc.stderr, proc.stderr
    git(repo, "config", "dlm-git.remoteCheck", "warn")
    proc = pre_push(repo, s3)
    assert proc.returncode == 0 and "dlm-git: WARN" in proc.stderr, proc.stderr
    git(repo, "config", "dlm-git.remoteCheck", "refuse")
    ok(dvc(repo, s3, "push"))
    proc = pre_push(repo, s3)
    assert proc.returncode == 0 and "dlm-git" not in proc.stderr, proc.stderr
