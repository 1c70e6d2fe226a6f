"""dlm-git's hooks under the real pre-commit framework (`pre-commit`, PyPI, 4.x).

In a copy of a trained repository whose `.dlm` was edited and retrained by `dvc repro`
(`retrained_once`: the verified repository of tests/support/verified.py, one retraining
per run shared by both configurations), a `.pre-commit-config.yaml` declares the hooks,
`pre-commit install` writes the framework's own git hooks, and real `git commit` / `git
push` run them: the edited `.dlm` staged without the records its retraining wrote is
refused (the index is what the hook judges; the framework stashes the unstaged tracked
records while it runs), the retrained records staged with it are accepted, a new untrained
document goes through with its WARN shown (`verbose: true`), and the push of that commit
is verified. `dlm-git init` then leaves the framework's hooks alone (no shim
of ours: every check would run twice) and says so. Two configurations:

- `local`: the snippet docs/hooks.md tells users to paste (read from the document, so
  the documentation is what is tested): `language: system`, the console scripts of the
  dlm-git on PATH (here the test venv's);
- `checkout`: `repo:` a snapshot of this checkout's work tree (what `pip install .`
  reads and `.pre-commit-hooks.yaml`, committed into a repository of its own, so the
  files tested are the ones here, committed or not) with the hook ids, as a user
  pointing at dlm-git's repository at a `rev:` writes it. `language: python`: the
  framework builds its own environment and installs dlm-git's core into it with pip
  (`PIP_CONSTRAINT`: the pinned versions; the packages come from the package registry,
  as in tests/integration/test_light_install.py), and the test venv is taken off PATH,
  so no `python` of ours can stand in for it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import run, subprocess_env
from tests.support.gitrepo import git
from tests.support.shared import build_once, shared_root
from tests.support.verified import copy_repo

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
HOOKS_DOC = REPO_ROOT / "docs" / "hooks.md"
VENV_BIN = Path(sys.executable).parent
CONSTRAINTS = REPO_ROOT / "requirements" / "constraints.txt"
DLM = "demo/demo.dlm"
EDIT = "\nOne more sentence to train on.\n"
"""Appended to the `.dlm`: the edit the hook refuses alone and accepts retrained."""
SNAPSHOT = (
    ".pre-commit-hooks.yaml",
    "pyproject.toml",
    "README.md",
    "MANIFEST.in",
    "build_backend",
    "dlm_git",
)
"""What the framework reads of dlm-git's repository: its manifest and what pip builds."""


def documented_config() -> str:
    """The `.pre-commit-config.yaml` snippet of docs/hooks.md (the `repo: local` one)."""
    blocks = re.findall(r"```yaml\n(.*?)```", HOOKS_DOC.read_text("utf-8"), re.S)
    local = [b for b in blocks if "repo: local" in b]
    assert len(local) == 1, "docs/hooks.md should hold one `repo: local` yaml snippet"
    return str(local[0])


def framework_source(tmp_path: Path) -> tuple[Path, str]:
    """A repository holding this checkout's `.pre-commit-hooks.yaml` and what `pip install
    .` reads, as the work tree has them (tracked and untracked files git does not
    ignore), committed: (its path, the commit's sha)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard", "--", *SNAPSHOT],
        cwd=REPO_ROOT,
        capture_output=True,
    )
    if listed.returncode != 0:
        pytest.skip("this checkout is not a git repository")
    dest = tmp_path / "dlm-git-src"
    for rel in filter(None, listed.stdout.decode("utf-8").split("\0")):
        if (REPO_ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / rel, dest / rel)
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        ok(sh(dest, tmp_path, "git", *argv))
    return dest, ok(sh(dest, tmp_path, "git", "rev-parse", "HEAD")).strip()


def checkout_config(tmp_path: Path) -> str:
    """`repo:` a snapshot of this checkout at a pinned `rev:`, with the hook ids of
    .pre-commit-hooks.yaml."""
    source, rev = framework_source(tmp_path)
    return (
        "repos:\n"
        f"  - repo: {source}\n"
        f"    rev: {rev}\n"
        "    hooks:\n"
        "      - id: dlm-git\n"
        "      - id: dlm-git-pre-push\n"
    )


def env(tmp_path: Path, venv_on_path: bool = True) -> dict[str, str]:
    """The framework's store in tmp, pip held to the pinned versions; the test venv's
    bin first on PATH (the local snippet's console scripts), or off it."""
    e = subprocess_env(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), PIP_CONSTRAINT=str(CONSTRAINTS)
    )
    e.pop("PRE_COMMIT", None)
    if not venv_on_path:
        path = e["PATH"].split(os.pathsep)
        e["PATH"] = os.pathsep.join(p for p in path if p and Path(p) != VENV_BIN)
        e.pop("VIRTUAL_ENV", None)
    return e


def sh(
    repo: Path, tmp_path: Path, *argv: str, venv_on_path: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=repo,
        capture_output=True,
        text=True,
        env=env(tmp_path, venv_on_path),
        timeout=900,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="session")
def retrained_once(tmp_path_factory: pytest.TempPathFactory, verified_repo: Path) -> Path:
    """The verified repository with `EDIT` appended to its `.dlm` and `dvc repro` run,
    nothing staged: HEAD's records in the index, the retrained ones in the work tree (the
    new adapter in the DVC cache). Built once per run (tests/support/shared.py); never
    modified: each configuration copies it."""

    def build(root: Path) -> None:
        copy_repo(verified_repo, root)
        doc = root / DLM
        doc.write_text(doc.read_text("utf-8") + EDIT, "utf-8")
        run(["dvc", "repro", "-q"], root)
        changed = set(git(root, "diff", "--name-only").split())
        assert {DLM, "demo/manifest.json", "dvc.lock"} <= changed, changed

    return build_once(shared_root(tmp_path_factory), "pre-commit-framework-retrained", build)


@pytest.mark.parametrize("config", ["local", "checkout"])
def test_framework_refuses_a_stale_commit_and_accepts_the_retrained_one(
    config: str, retrained_once: Path, tmp_path: Path
) -> None:
    text = documented_config() if config == "local" else checkout_config(tmp_path)
    repo = copy_repo(retrained_once, tmp_path / "repo")
    (repo / ".pre-commit-config.yaml").write_text(text, "utf-8")

    def hooked(*argv: str) -> subprocess.CompletedProcess[str]:
        """A git command that runs the hooks: `checkout` with the test venv off PATH."""
        return sh(repo, tmp_path, "git", *argv, venv_on_path=config == "local")

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
    hooks = repo / ".git" / "hooks"
    hook = (hooks / "pre-commit").read_text("utf-8")
    assert "dlm-git hook" not in hook and "pre-commit" in hook  # the framework's own hook

    # `dlm-git init` installs no shim of its own over the framework's, and says so
    out = ok(sh(repo, tmp_path, str(VENV_BIN / "dlm-git"), "init"))
    assert "hooks: not installed: .pre-commit-config.yaml runs dlm-git's hooks" in out, out
    assert (hooks / "pre-commit").read_text("utf-8") == hook
    assert not list(hooks.glob("*.dlm-git-chained")), sorted(hooks.iterdir())
    assert not (hooks / "pre-merge-commit").exists()

    # the edited .dlm staged without its retrained records: refused by the framework's
    # run of our hook
    head = ok(sh(repo, tmp_path, "git", "rev-parse", "HEAD"))
    ok(sh(repo, tmp_path, "git", "add", DLM))
    assert ok(sh(repo, tmp_path, "git", "diff", "--cached", "--name-only")) == f"{DLM}\n"
    proc = hooked("commit", "-q", "-m", "stale")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, said
    assert "dlm-git determinism contract" in said and "Failed" in said, said
    assert f"{DLM} changed since it was trained (manifest.json is stale)" in said, said
    assert ok(sh(repo, tmp_path, "git", "rev-parse", "HEAD")) == head
    if config == "checkout":  # the framework's own environment ran it, with dlm-git in it
        home = tmp_path / "pre-commit-home"
        assert list(home.glob("repo*/py_env-*/bin/dlm-git-pre-commit")), sorted(home.iterdir())

    # the same edit with the records its retraining wrote (`retrained_once`), staged:
    # accepted
    ok(sh(repo, tmp_path, "git", "add", "-A"))
    proc = hooked("commit", "-q", "-m", "retrained")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "dlm-git determinism contract" in said and "Passed" in said, said
    assert ok(sh(repo, tmp_path, "git", "rev-parse", "HEAD")) != head

    # a new document committed before its first training: accepted, and its WARN shown
    # (the framework prints a passing hook's output only for `verbose: true`)
    out = ok(sh(repo, tmp_path, str(VENV_BIN / "dlm-git"), "new", "fresh/fresh.dlm"))
    assert out.startswith("dlm-git new: created fresh/fresh.dlm (dlm_id "), out
    ok(sh(repo, tmp_path, "git", "add", "fresh/fresh.dlm"))
    proc = hooked("commit", "-q", "-m", "a new document")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "dlm-git: WARN fresh: doc.trained: document not trained yet" in said, said
    new_head = ok(sh(repo, tmp_path, "git", "rev-parse", "HEAD"))

    # its push runs the pre-push hook (hash-level verify of the pushed commit): accepted
    remote = tmp_path / "remote.git"
    ok(sh(tmp_path, tmp_path, "git", "init", "-q", "--bare", str(remote)))
    ok(sh(repo, tmp_path, "git", "remote", "add", "origin", str(remote)))
    proc = hooked("push", "origin", "HEAD:main")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "dlm-git verify (hash level) on push" in said and "Passed" in said, said
    assert ok(sh(remote, tmp_path, "git", "rev-parse", "main")) == new_head
