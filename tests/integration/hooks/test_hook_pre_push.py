"""The pre-push hook verifies every pushed commit (from git's stdin, or from the pre-commit
framework's variables) and refuses a push carrying a tampered record or adapter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlm_git.hashing import canonical_json
from tests.support.env import VENV_BIN, run, subprocess_env
from tests.support.gitrepo import git, head
from tests.support.hookrepo import DOC, MANIFEST, adapter_md5, cache_path, commit, read, write

pytestmark = pytest.mark.slow


def test_pre_push_verifies_pushed_commits(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    good = head(repo)
    proc = run(["git", "push", "-q", "origin", "HEAD:main"], repo, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "dlm-git: ERROR" not in proc.stderr
    # the one thing said: the adapter is on no DVC remote, so no one else can fetch it
    assert "dlm-git: WARN no default DVC remote" in proc.stderr, proc.stderr
    assert git(remote, "rev-parse", "main").strip() == good

    # A record edited past the pre-commit hook (--no-verify) is caught on push.
    manifest = json.loads(read(repo, MANIFEST))
    manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "ab" * 32
    write(repo, MANIFEST, canonical_json(manifest))
    assert commit(repo, "--no-verify").returncode == 0
    bad = head(repo)
    proc = run(["git", "push", "-q", "origin", "HEAD:main"], repo, check=False)
    assert proc.returncode != 0
    assert f"dlm-git: ERROR {DOC}@{bad[:12]}: FAILED" in proc.stderr, proc.stderr
    assert "push refused" in proc.stderr
    assert git(remote, "rev-parse", "main").strip() == good


def test_pre_push_refuses_an_adapter_tampered_in_the_dvc_cache(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    listing = json.loads(cache_path(repo, adapter_md5(read(repo, "dvc.lock"))).read_text())
    weights = next(e["md5"] for e in listing if e["relpath"] == "adapter_model.safetensors")
    obj = cache_path(repo, weights)
    obj.chmod(0o644)
    data = bytearray(obj.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit in the last tensor's bytes
    obj.write_bytes(bytes(data))
    before = head(repo)
    proc = run(["git", "push", "-q", "origin", "HEAD:main"], repo, check=False)
    assert proc.returncode != 0
    assert f"dlm-git: ERROR {DOC}@{before[:12]}: FAILED" in proc.stderr, proc.stderr
    assert git(remote, "rev-parse", "--verify", "--quiet", "main", check=False) == ""


def test_pre_push_under_the_pre_commit_framework(repo: Path) -> None:
    """The framework reads git's stdin itself and passes the pushed sha in
    PRE_COMMIT_TO_REF; the hook must verify that commit, not see "nothing pushed"."""
    good = head(repo)
    manifest = json.loads(read(repo, MANIFEST))
    manifest["adapter"]["files"]["adapter_model.safetensors"]["sha256"] = "ab" * 32
    write(repo, MANIFEST, canonical_json(manifest))
    assert commit(repo, "--no-verify").returncode == 0
    bad = head(repo)
    argv = [sys.executable, "-m", "dlm_git.hooks.pre_push"]
    for sha, code in ((good, 0), (bad, 1)):
        proc = subprocess.run(
            argv,
            cwd=repo,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=subprocess_env(PRE_COMMIT_FROM_REF="0" * 40, PRE_COMMIT_TO_REF=sha),
        )
        assert proc.returncode == code, proc.stderr
    assert f"dlm-git: ERROR {DOC}@{bad[:12]}: FAILED" in proc.stderr
    # A push carrying the root commit: the framework sets only the local ref.
    proc = subprocess.run(
        argv,
        cwd=repo,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=subprocess_env(PRE_COMMIT_LOCAL_BRANCH="HEAD", PRE_COMMIT_REMOTE_NAME="origin"),
    )
    assert proc.returncode == 1, proc.stderr
    assert f"dlm-git: ERROR {DOC}@{bad[:12]}: FAILED" in proc.stderr


def test_pre_push_asks_the_dvc_remote_through_its_child(repo: Path, tmp_path: Path) -> None:
    """The remote check's child asks the default DVC remote (real DVC, a local remote):
    adapter objects not on it refuse the push until `dvc push`. A remote the child cannot
    ask (here an unknown URL scheme, DVC raising in the child) is one WARN line naming
    why, no traceback, and refuses nothing: not knowing is not "missing"."""
    git(tmp_path, "init", "-q", "--bare", str(tmp_path / "remote.git"))
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    run([VENV_BIN / "dvc", "remote", "add", "-d", "--local", "store", str(tmp_path / "dvc")], repo)
    push = ["git", "push", "-q", "origin", "HEAD:main"]
    proc = run(push, repo, check=False)
    assert proc.returncode == 1, proc.stderr
    assert f"dlm-git: ERROR {DOC}@{head(repo)[:12]}: " in proc.stderr, proc.stderr
    assert "adapter object(s) not on DVC remote 'store'" in proc.stderr, proc.stderr
    run([VENV_BIN / "dvc", "push", "-q"], repo)
    proc = run(push, repo, check=False)
    assert proc.returncode == 0 and "dlm-git" not in proc.stderr, proc.stderr

    broken = "[core]\n    remote = broken\n['remote \"broken\"']\n    url = nosuch://b/x\n"
    (repo / ".dvc" / "config.local").write_text(broken, "utf-8")
    git(repo, "commit", "-q", "--allow-empty", "--no-verify", "-m", "one more")
    proc = run(push, repo, check=False)
    assert proc.returncode == 0, proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("dlm-git")]
    assert len(said) == 2 and said[-1] == "dlm-git: 0 error(s), 1 warning(s): ok", said
    assert said[0].startswith("dlm-git: WARN DVC remote: could not be queried: "), said
    assert "Unsupported URL type nosuch://" in said[0] and "Traceback" not in proc.stderr
