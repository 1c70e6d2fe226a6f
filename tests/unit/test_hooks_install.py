"""`dlm-git hooks install`: shims, chaining an existing hook, core.hooksPath, uninstall."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlm_git.errors import DlmGitError
from dlm_git.hooks.install import CHAINED_SUFFIX, MARKER, install_hooks, is_ours, shim_text

# --------------------------------------------------------------------------- install


def test_shim_text_runs_the_module_and_chains() -> None:
    text = shim_text("pre-commit", "/opt/my env/bin/python")
    assert text.startswith("#!/bin/sh\n") and MARKER in text
    assert "py='/opt/my env/bin/python'" in text
    assert f'"$here/pre-commit{CHAINED_SUFFIX}" "$@" || exit $?' in text
    assert 'exec "$py" -m dlm_git.hooks.pre_commit "$@"' in text
    push = shim_text("pre-push", "/usr/bin/python3")
    assert "dlm_git.hooks.pre_push" in push and "input=$(cat)" in push
    merge = shim_text("pre-merge-commit", "/usr/bin/python3")
    assert f'"$here/pre-merge-commit{CHAINED_SUFFIX}" "$@" || exit $?' in merge
    assert 'exec "$py" -m dlm_git.hooks.pre_merge_commit "$@"' in merge


def test_install_is_idempotent_and_updates_stale_shims(git_repo: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    lines = install_hooks(git_repo)
    assert lines == [
        f"pre-commit: installed in {hooks}",
        f"pre-merge-commit: installed in {hooks}",
        f"pre-push: installed in {hooks}",
    ]
    for name in ("pre-commit", "pre-merge-commit", "pre-push"):
        assert is_ours(hooks / name) and os.access(hooks / name, os.X_OK)
    assert install_hooks(git_repo) == [
        "pre-commit: already installed",
        "pre-merge-commit: already installed",
        "pre-push: already installed",
    ]
    (hooks / "pre-commit").write_text(f"#!/bin/sh\n{MARKER} (old)\n")
    assert install_hooks(git_repo)[0] == "pre-commit: updated"
    assert (hooks / "pre-commit").read_text() == shim_text("pre-commit")


def test_install_chains_foreign_hook_and_uninstall_restores(git_repo: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    foreign = "#!/bin/sh\nexit 0\n"
    (hooks / "pre-push").write_text(foreign)
    lines = install_hooks(git_repo)
    assert lines[2].endswith(f"(existing hook kept, runs first as pre-push{CHAINED_SUFFIX})")
    assert (hooks / f"pre-push{CHAINED_SUFFIX}").read_text() == foreign
    assert install_hooks(git_repo, uninstall=True) == [
        "pre-commit: removed",
        "pre-merge-commit: removed",
        "pre-push: removed (restored the previous hook)",
    ]
    assert (hooks / "pre-push").read_text() == foreign
    assert not (hooks / "pre-commit").exists()
    assert not (hooks / "pre-merge-commit").exists()
    assert install_hooks(git_repo, uninstall=True) == [
        "pre-commit: not installed",
        "pre-merge-commit: not installed",
        "pre-push: not installed",
    ]
    assert (hooks / "pre-push").read_text() == foreign  # a foreign hook is never removed


def test_install_keeps_a_symlinked_hook(git_repo: Path, tmp_path: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    target = tmp_path / "lfs-hook"
    target.write_text("#!/bin/sh\nexit 0\n")
    (hooks / "pre-commit").symlink_to(target)
    install_hooks(git_repo)
    chained = hooks / f"pre-commit{CHAINED_SUFFIX}"
    assert chained.is_symlink() and chained.resolve() == target.resolve()


def test_install_refuses_when_foreign_and_chained_both_exist(git_repo: Path) -> None:
    hooks = git_repo / ".git" / "hooks"
    (hooks / "pre-commit").write_text("#!/bin/sh\n")
    (hooks / f"pre-commit{CHAINED_SUFFIX}").write_text("#!/bin/sh\n")
    with pytest.raises(DlmGitError, match="both a foreign hook"):
        install_hooks(git_repo)


def test_install_outside_git_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DlmGitError, match="not a git repository"):
        install_hooks(tmp_path)
