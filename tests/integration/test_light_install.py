"""The core install (`pip install dlm-git`, no `[train]` extra) in a real, fresh venv.

A venv is built from this checkout with the pinned constraints and nothing else (no
torch, transformers, peft, tokenizers, safetensors, numpy or dvc: checked). A repository
trained with the full install (the falsifiability suite's verified repository,
tests/support/verified.py) is then used through the core venv's interpreter only:
the git hooks (installed by the core `dlm-git hooks install`) refuse a stale commit and
let an honest commit and its push through, `verify` proves the commit at hash level, and
every command that needs the training stack says so in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import subprocess_env
from tests.support.verified import copy_repo

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO_ROOT / "requirements" / "constraints.txt"
TRAINING_STACK = (
    "torch",
    "transformers",
    "peft",
    "tokenizers",
    "safetensors",
    "numpy",
    "dvc",
    "blake3",
    "pygit2",
)
TRAIN_HINT = "(hint: pip install 'dlm-git[train]')"


@pytest.fixture(scope="module")
def core_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/ of a fresh venv with `pip install -c constraints.txt <this checkout>`."""
    venv = tmp_path_factory.mktemp("core-install") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-c",
            str(CONSTRAINTS),
            str(REPO_ROOT),
        ],
        capture_output=True,
        text=True,
        env=core_env(venv / "bin"),
    )
    assert proc.returncode == 0, f"core install failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return venv / "bin"


def core_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The test environment with the core venv first on PATH and the full venv off it."""
    env = subprocess_env()
    full_bin = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != full_bin]
    env["PATH"] = os.pathsep.join([str(bin_dir), *path])
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "GIT_DIR", "GIT_INDEX_FILE"):
        env.pop(name, None)
    env.update(extra)
    return env


@pytest.fixture
def repo(tmp_path: Path, verified_repo: Path) -> Path:
    """A private copy of the trained, committed repository (built with the full venv)."""
    return copy_repo(verified_repo, tmp_path / "repo")


def run(
    bin_dir: Path, repo: Path, *argv: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=repo,
        input=stdin,
        capture_output=True,
        text=True,
        env=core_env(bin_dir),
    )


def dlm_git(bin_dir: Path, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(bin_dir, repo, str(bin_dir / "dlm-git"), *args)


def git(bin_dir: Path, repo: Path, *args: str) -> str:
    proc = run(bin_dir, repo, "git", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# --------------------------------------------------------------------------- the install


def test_core_install_has_no_training_stack(core_bin: Path, tmp_path: Path) -> None:
    proc = run(core_bin, tmp_path, str(core_bin / "python"), "-c", "import torch")
    assert proc.returncode == 1 and "No module named 'torch'" in proc.stderr, proc.stderr
    probe = (
        "import importlib.util, json, sys; "
        "print(json.dumps({m: importlib.util.find_spec(m) is not None for m in sys.argv[1:]}))"
    )
    proc = run(core_bin, tmp_path, str(core_bin / "python"), "-c", probe, *TRAINING_STACK)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {m: False for m in TRAINING_STACK}
    # dlm_git itself comes from the core venv, not from this checkout
    where = "import dlm_git; print(dlm_git.__file__)"
    proc = run(core_bin, tmp_path, str(core_bin / "python"), "-c", where)
    assert proc.stdout.startswith(str(core_bin.parent)), proc.stdout


# --------------------------------------------------------------------------- what works


def test_hooks_refuse_a_stale_commit_and_pass_an_honest_commit_and_push(
    core_bin: Path, repo: Path, tmp_path: Path
) -> None:
    out = dlm_git(core_bin, repo, "hooks", "install")
    assert out.returncode == 0, out.stderr
    assert "pre-commit: installed" in out.stdout and "pre-push: installed" in out.stdout
    shim = (repo / ".git" / "hooks" / "pre-commit").read_text("utf-8")
    assert str(core_bin / "python") in shim  # the hooks run the core venv's interpreter

    # a .dlm edited without retraining: refused, HEAD unchanged
    head = git(core_bin, repo, "rev-parse", "HEAD")
    doc = repo / "demo" / "demo.dlm"
    doc.write_text(doc.read_text("utf-8") + "\nOne more sentence, never trained on.\n", "utf-8")
    git(core_bin, repo, "add", "demo/demo.dlm")
    proc = run(core_bin, repo, "git", "commit", "-q", "-m", "stale")
    assert proc.returncode != 0
    assert "demo/demo.dlm changed since it was trained" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert git(core_bin, repo, "rev-parse", "HEAD") == head

    # an honest commit (nothing a document depends on) goes through, and so does its push
    git(core_bin, repo, "reset", "-q", "--hard")
    (repo / "README.md").write_text("# notes\n", "utf-8")
    git(core_bin, repo, "add", "README.md")
    proc = run(core_bin, repo, "git", "commit", "-q", "-m", "readme")
    assert proc.returncode == 0, proc.stderr
    remote = tmp_path / "remote.git"
    git(core_bin, tmp_path, "init", "-q", "--bare", str(remote))
    git(core_bin, repo, "remote", "add", "origin", str(remote))
    proc = run(core_bin, repo, "git", "push", "-q", "origin", "HEAD:main")
    assert proc.returncode == 0, proc.stderr
    # verified: no ERROR; the one thing said is that no DVC remote holds the adapter
    said = [line for line in proc.stderr.splitlines() if line.startswith("dlm-git:")]
    assert said[0].startswith("dlm-git: WARN no default DVC remote"), proc.stderr
    assert said[1:] == ["dlm-git: 0 error(s), 1 warning(s): ok"], proc.stderr
    assert git(core_bin, remote, "rev-parse", "main") == git(core_bin, repo, "rev-parse", "HEAD")


def test_verify_at_hash_level(core_bin: Path, repo: Path) -> None:
    proc = dlm_git(core_bin, repo, "verify", "HEAD", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["verdict"] == "VERIFIED"
    docs = report["documents"]
    assert [d["verdict"] for d in docs] == ["VERIFIED"], proc.stdout
    assert {c["name"] for c in docs[0]["checks"] if c["ok"]} >= {
        "adapter.sha256",
        "base.identity",
        "dvc.binding",
    }
    proc = dlm_git(core_bin, repo, "verify", "--worktree", "--doc", "demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "VERIFIED" in proc.stdout


def test_show(core_bin: Path, repo: Path) -> None:
    proc = dlm_git(core_bin, repo, "show", "demo", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["counts"]["instruction"] == 2
    assert "needs the training stack" in report["base_model"]["note"]


# --------------------------------------------------------------------------- what needs [train]


@pytest.mark.parametrize(
    "argv",
    [
        ("train", "demo"),
        ("tokenize", "demo"),
        ("doctor",),
        ("base", "build", "--out", "built-base"),
        ("verify", "HEAD", "--level", "replay"),
        ("init",),
    ],
    ids=" ".join,
)
def test_training_stack_commands_say_what_to_install(
    core_bin: Path, repo: Path, argv: tuple[str, ...]
) -> None:
    before = git(core_bin, repo, "status", "--porcelain")
    proc = dlm_git(core_bin, repo, *argv)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    command = "dlm-git " + " ".join(argv[:2] if argv[0] == "base" else argv[:1])
    assert lines[0].startswith(f"{command}: needs the training stack ("), lines[0]
    assert lines[0].endswith(f" is not installed) {TRAIN_HINT}"), lines[0]
    assert git(core_bin, repo, "status", "--porcelain") == before  # nothing written
    assert not (repo / "built-base").exists()
