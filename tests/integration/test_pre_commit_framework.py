"""dlm-git's hooks under the real pre-commit framework (`pre-commit`, PyPI, 4.x).

In a copy of a trained repository (tests/support/verified.py), a
`.pre-commit-config.yaml` declares the hooks, `pre-commit install` writes the framework's
own git hooks, and real `git commit` / `git push` run them: a `.dlm` edited without
retraining is refused, the same edit retrained (`dvc repro`) is accepted, and the push
of that commit is verified. Two configurations:

- `local`: the snippet docs/hooks.md tells users to paste (read from the document, so
  the documentation is what is tested);
- `checkout`: `repo:` this checkout with the hook ids of `.pre-commit-hooks.yaml`, as a
  user pointing at dlm-git's repository would write it (the framework clones it; a
  local path works offline).

Both hooks are `language: system`: the framework builds no environment and runs
`python -m dlm_git.hooks...` with the `python` on PATH (here the test venv's).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import subprocess_env
from tests.support.verified import copy_repo

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
HOOKS_DOC = REPO_ROOT / "docs" / "hooks.md"
VENV_BIN = Path(sys.executable).parent
DLM = "demo/demo.dlm"


def documented_config() -> str:
    """The `.pre-commit-config.yaml` snippet of docs/hooks.md (the `repo: local` one)."""
    blocks = re.findall(r"```yaml\n(.*?)```", HOOKS_DOC.read_text("utf-8"), re.S)
    local = [b for b in blocks if "repo: local" in b]
    assert len(local) == 1, "docs/hooks.md should hold one `repo: local` yaml snippet"
    return local[0]


def checkout_config() -> str:
    """`repo:` this checkout at its HEAD, with the ids of .pre-commit-hooks.yaml."""
    proc = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip("this checkout is not a git repository")
    return (
        "repos:\n"
        f"  - repo: {REPO_ROOT}\n"
        f"    rev: {proc.stdout.strip()}\n"
        "    hooks:\n"
        "      - id: dlm-git\n"
        "      - id: dlm-git-pre-push\n"
    )


def env(tmp_path: Path) -> dict[str, str]:
    """The test venv's bin first on PATH (the framework's `python`, and dvc), the
    framework's store in tmp."""
    e = subprocess_env(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    e.pop("PRE_COMMIT", None)
    return e


def sh(repo: Path, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=repo, capture_output=True, text=True, env=env(tmp_path))


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize("config", ["local", "checkout"])
def test_framework_refuses_a_stale_commit_and_accepts_the_retrained_one(
    config: str, verified_repo: Path, tmp_path: Path
) -> None:
    text = documented_config() if config == "local" else checkout_config()
    repo = copy_repo(verified_repo, tmp_path / "repo")
    (repo / ".pre-commit-config.yaml").write_text(text, "utf-8")
    ok(sh(repo, tmp_path, "git", "add", ".pre-commit-config.yaml"))
    ok(sh(repo, tmp_path, "git", "commit", "-q", "--no-verify", "-m", "pre-commit config"))
    out = ok(
        sh(
            repo,
            tmp_path,
            str(VENV_BIN / "pre-commit"),
            "install",
            "--hook-type",
            "pre-commit",
            "--hook-type",
            "pre-push",
        )
    )
    assert "pre-commit installed at .git/hooks/pre-commit" in out
    assert "pre-commit installed at .git/hooks/pre-push" in out
    hook = (repo / ".git" / "hooks" / "pre-commit").read_text("utf-8")
    assert "dlm-git hook" not in hook and "pre-commit" in hook  # the framework's own hook

    # a .dlm edited without retraining: refused by the framework's run of our hook
    head = ok(sh(repo, tmp_path, "git", "rev-parse", "HEAD"))
    doc = repo / DLM
    doc.write_text(doc.read_text("utf-8") + "\nOne more sentence to train on.\n", "utf-8")
    ok(sh(repo, tmp_path, "git", "add", DLM))
    proc = sh(repo, tmp_path, "git", "commit", "-q", "-m", "stale")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said
    assert "dlm-git determinism contract" in said and "Failed" in said, said
    assert f"{DLM} changed since it was trained (manifest.json is stale)" in said, said
    assert ok(sh(repo, tmp_path, "git", "rev-parse", "HEAD")) == head

    # the same edit, retrained and staged: accepted
    ok(sh(repo, tmp_path, str(VENV_BIN / "dvc"), "repro", "-q"))
    ok(sh(repo, tmp_path, "git", "add", "-A"))
    proc = sh(repo, tmp_path, "git", "commit", "-q", "-m", "retrained")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "dlm-git determinism contract" in said and "Passed" in said, said
    new_head = ok(sh(repo, tmp_path, "git", "rev-parse", "HEAD"))
    assert new_head != head

    # its push runs the pre-push hook (hash-level verify of the pushed commit): accepted
    remote = tmp_path / "remote.git"
    ok(sh(tmp_path, tmp_path, "git", "init", "-q", "--bare", str(remote)))
    ok(sh(repo, tmp_path, "git", "remote", "add", "origin", str(remote)))
    proc = sh(repo, tmp_path, "git", "push", "origin", "HEAD:main")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "dlm-git verify (hash level) on push" in said and "Passed" in said, said
    assert ok(sh(remote, tmp_path, "git", "rev-parse", "main")) == new_head
