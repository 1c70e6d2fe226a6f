"""The environment of every subprocess the tests start (git, `dlm-git`, dvc, python), and
the one runner that starts them.

Invariants:
- Nothing of the user's configuration reaches a test. Git reads one global file, made
  for this test session (`GIT_CONFIG_GLOBAL`), and no system file (`GIT_CONFIG_NOSYSTEM`);
  `git -c` settings of a calling process (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`...)
  are dropped. DVC's global and system config and its site cache live in the session's
  directory, and so does `XDG_CONFIG_HOME`. So a user's `core.hooksPath`,
  `init.templateDir`, `commit.gpgsign` or identity in `~/.gitconfig`, or a DVC remote in
  `~/.config/dvc`, changes nothing. `HOME` itself is left alone: git and DVC no longer read
  from it, and the tests of `~` in source paths set it themselves.
- The settings the tests rely on are explicit, in that one global file (`GIT_SETTINGS`):
  an identity, no signing, `master` as the first branch.
- The test venv's `bin` comes first on `PATH`, so `dlm-git` and `dvc` are this checkout's;
  DVC analytics are off; git's per-command variables (`GIT_DIR`, `GIT_INDEX_FILE`,
  `GIT_WORK_TREE`, set when the tests themselves run inside a git hook) are dropped.
- tests/conftest.py puts `isolation()` into the test process's own environment for the
  session, so git children of in-process `dlm-git` calls are isolated too, and
  `subprocess_env()` asserts it again whatever the environment holds by then.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
"""The test venv's scripts (`dlm-git`, `dvc`, `python`)."""

GIT_SETTINGS = {
    "user.name": "dlm-git tests",
    "user.email": "tests@dlm-git.invalid",
    "commit.gpgsign": "false",
    "tag.gpgsign": "false",
    "init.defaultBranch": "master",
}
"""The session's global git config: everything a test may rely on git being set to."""

DROPPED = (
    "GIT_DIR",
    "GIT_INDEX_FILE",
    "GIT_WORK_TREE",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
)
"""Variables of the calling process never passed on (with `GIT_CONFIG_PAIRS`)."""
GIT_CONFIG_PAIRS = ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
"""Prefixes of the `git -c` settings a calling process passes its children, never passed on."""


@functools.cache
def session_dir() -> Path:
    """This process's configuration directory (made once, removed at exit)."""
    root = Path(tempfile.mkdtemp(prefix="dlm-git-tests-config-"))
    atexit.register(shutil.rmtree, root, True)
    lines = []
    for key, value in GIT_SETTINGS.items():
        section, name = key.split(".")
        lines += [f"[{section}]", f"\t{name} = {value}"]
    (root / "gitconfig").write_text("\n".join(lines) + "\n", "utf-8")
    for sub in ("xdg-config", "dvc-global", "dvc-system", "dvc-site-cache"):
        (root / sub).mkdir()
    return root


def isolation() -> dict[str, str]:
    """The variables that keep git and DVC to the session's configuration."""
    root = session_dir()
    return {
        "GIT_CONFIG_GLOBAL": str(root / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "XDG_CONFIG_HOME": str(root / "xdg-config"),
        "DVC_GLOBAL_CONFIG_DIR": str(root / "dvc-global"),
        "DVC_SYSTEM_CONFIG_DIR": str(root / "dvc-system"),
        "DVC_SITE_CACHE_DIR": str(root / "dvc-site-cache"),
        "DVC_NO_ANALYTICS": "1",
    }


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess: this process's, isolated (see the module), the
    venv's `bin` first on PATH, and `extra` on top."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in DROPPED and not key.startswith(GIT_CONFIG_PAIRS)
    }
    env.update(isolation())
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run(
    cmd: Sequence[str | Path],
    cwd: Path,
    *,
    check: bool = True,
    input: str | None = None,
    timeout: float | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run `cmd` in `cwd` under `subprocess_env(**env)`, output captured as text; with
    `check`, a non-zero exit fails the test with the command's output."""
    proc = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=subprocess_env(**env),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc
