"""Install (or remove) dlm-git's git hooks without clobbering anyone else's.

Invariants:
- The hooks directory is the one git uses (`git rev-parse --git-path hooks`, which
  honours `core.hooksPath`).
- An existing hook that is not ours (DVC's, git-lfs's, a user's) is kept: it is renamed to
  `<hook>.dlm-git-chained` and our shim runs it first, with the same arguments and stdin;
  if it fails, the commit or push fails with its exit code.
- Idempotent: installing twice changes nothing; uninstalling restores the chained hook.
- The hook runs the dlm-git it was installed with, never a `dlm_git/` in the work tree
  (the commit's bytes, and git's working directory for hooks): `PYTHONSAFEPATH=1` keeps
  the working directory off the import path. An older shim says `updated` on reinstall.
- A repository whose `.pre-commit-config.yaml` declares one of our hook ids
  (`FRAMEWORK_IDS`, those of `.pre-commit-hooks.yaml`) runs them through the pre-commit
  framework: `dlm-git init` then installs no shim of its own (every check would run
  twice) and says so in one line (`framework_note`). `dlm-git hooks install` still
  installs when asked.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import yaml

from dlm_git import gitio
from dlm_git.errors import DlmGitError
from dlm_git.fsutil import atomic_write_text
from dlm_git.safeparse import load_yaml

MARKER = "# dlm-git hook v1"
HOOKS = ("pre-commit", "pre-merge-commit", "pre-push")
"""pre-merge-commit: git runs it instead of pre-commit for a merge that commits by itself."""
CHAINED_SUFFIX = ".dlm-git-chained"

SHIM = """#!/bin/sh
{marker} ({hook}) - installed by `dlm-git hooks install`
# remove with `dlm-git hooks install --uninstall`
here=$(dirname "$0")
py={python}
[ -x "$py" ] || py=python3
{body}
"""

PRE_COMMIT_BODY = """if [ -x "$here/{hook}{chained}" ]; then
  "$here/{hook}{chained}" "$@" || exit $?
fi
export PYTHONSAFEPATH=1  # the work tree (the commit's bytes) is not on the import path
exec "$py" -m dlm_git.hooks.{module} "$@\""""

PRE_PUSH_BODY = """input=$(cat)
if [ -x "$here/pre-push{chained}" ]; then
  printf '%s\\n' "$input" | "$here/pre-push{chained}" "$@" || exit $?
fi
export PYTHONSAFEPATH=1  # the work tree (the commit's bytes) is not on the import path
printf '%s\\n' "$input" | exec "$py" -m dlm_git.hooks.pre_push "$@\""""


FRAMEWORK_CONFIG = ".pre-commit-config.yaml"
FRAMEWORK_IDS = frozenset({"dlm-git", "dlm-git-pre-merge-commit", "dlm-git-pre-push"})
FRAMEWORK_INSTALL = (
    "pre-commit install --hook-type pre-commit --hook-type pre-merge-commit --hook-type pre-push"
)


def framework_declares_ours(repo_root: Path) -> bool:
    """Whether `.pre-commit-config.yaml` lists a hook with one of our ids (a file that is
    not there, or does not parse, declares none: the framework says what is wrong)."""
    try:
        data = load_yaml((repo_root / FRAMEWORK_CONFIG).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        return False
    repos = data.get("repos") if isinstance(data, dict) else None
    hooks = (
        [h for r in repos if isinstance(r, dict) for h in r.get("hooks") or []]
        if isinstance(repos, list)
        else []
    )
    return any(isinstance(h, dict) and h.get("id") in FRAMEWORK_IDS for h in hooks)


def framework_note(repo_root: Path) -> str | None:
    """The one line `dlm-git init` says instead of installing its shims when the pre-commit
    framework runs our hooks (None: it does not)."""
    if not framework_declares_ours(repo_root):
        return None
    directory = gitio.hooks_path(repo_root)
    ours = [h for h in HOOKS if is_ours(directory / h)]
    also = (
        f"; dlm-git's own {', '.join(ours)} hook(s) are installed too and run every check"
        " twice: `dlm-git hooks install --uninstall`"
        if ours
        else ""
    )
    return (
        f"hooks: not installed: {FRAMEWORK_CONFIG} runs dlm-git's hooks through the"
        f" pre-commit framework (`{FRAMEWORK_INSTALL}`){also}"
    )


def shim_text(hook: str, python: str | None = None) -> str:
    module = hook.replace("-", "_")
    body = PRE_PUSH_BODY if hook == "pre-push" else PRE_COMMIT_BODY
    return SHIM.format(
        marker=MARKER,
        hook=hook,
        python=shlex.quote(python or sys.executable),
        body=body.format(chained=CHAINED_SUFFIX, hook=hook, module=module),
    )


def is_ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text("utf-8", errors="replace")
    except OSError:
        return False


def install_hooks(repo_root: Path, uninstall: bool = False) -> list[str]:
    """Install or remove our hooks; returns one line per hook saying what was done."""
    directory = gitio.hooks_path(repo_root)
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for hook in HOOKS:
        path = directory / hook
        chained = directory / (hook + CHAINED_SUFFIX)
        if uninstall:
            lines.append(_uninstall(path, chained, hook))
            continue
        wanted = shim_text(hook)
        if path.exists() and is_ours(path):
            if path.read_text("utf-8") == wanted:
                lines.append(f"{hook}: already installed")
                continue
            atomic_write_text(path, wanted)
            os.chmod(path, 0o755)
            lines.append(f"{hook}: updated")
            continue
        note = ""
        if path.exists() or path.is_symlink():
            if chained.exists():
                raise DlmGitError(
                    str(path),
                    f"both a foreign hook and {chained.name} exist",
                    f"merge them by hand, then remove {chained.name}",
                )
            os.replace(path, chained)
            note = f" (existing hook kept, runs first as {chained.name})"
        atomic_write_text(path, wanted)
        os.chmod(path, 0o755)
        lines.append(f"{hook}: installed in {directory}{note}")
    return lines


def _uninstall(path: Path, chained: Path, hook: str) -> str:
    if not path.exists() or not is_ours(path):
        return f"{hook}: not installed"
    path.unlink()
    if chained.exists():
        os.replace(chained, path)
        return f"{hook}: removed (restored the previous hook)"
    return f"{hook}: removed"
