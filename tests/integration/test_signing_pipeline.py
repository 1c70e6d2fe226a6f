"""Signing as an optional DVC stage: `dlm-git init --sign` adds `sign@<doc>`, which signs
with the key this machine configures ($DLM_GIT_SIGNING_KEY or git config
dlm-git.signingKey; never a committed file) and is skipped where there is none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import subprocess_env
from tests.support.gitrepo import git, init_repo

pytestmark = pytest.mark.slow


def run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        cwd=cwd,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_sign_stage_signs_with_the_machines_key_or_skips(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert (
        run(tmp_path, sys.executable, "-m", "dlm_git", "keygen", "--out", str(keys)).returncode == 0
    )
    repo = init_repo(tmp_path / "repo")
    proc = run(
        repo, sys.executable, "-m", "dlm_git", "init", "--doc", "notes", "--no-hooks", "--sign"
    )
    assert proc.returncode == 0 and "sign" in proc.stdout, proc.stdout + proc.stderr
    text = (
        (repo / "notes" / "notes.dlm").read_text("utf-8").replace("max_steps: 20", "max_steps: 2")
    )
    (repo / "notes" / "notes.dlm").write_text(text, "utf-8")

    proc = run(repo, sys.executable, "-m", "dvc", "repro")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no signing key configured" in proc.stdout and not (repo / "notes" / "dlm.sig").exists()

    private = str(keys / "dlm-signing-key.pem")
    proc = run(
        repo,
        sys.executable,
        "-m",
        "dvc",
        "repro",
        "--force",
        "sign@notes",
        DLM_GIT_SIGNING_KEY=private,
    )
    assert proc.returncode == 0 and (repo / "notes" / "dlm.sig").is_file(), (
        proc.stdout + proc.stderr
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "trained and signed by the pipeline")
    git(repo, "config", "dlm-git.trustedKeys", str(keys / "dlm-signing-key.pub.pem"))
    proc = run(
        repo, sys.executable, "-m", "dlm_git", "verify", "HEAD", "--require-signature", "--json"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = {c["name"]: c["ok"] for c in json.loads(proc.stdout)["documents"][0]["checks"]}
    assert checks["signature.valid"] and checks["signature.trusted"] and checks["signature.binding"]
    assert "dlm-signing-key" not in (repo / "dvc.yaml").read_text("utf-8")
