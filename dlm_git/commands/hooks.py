"""`dlm-git hooks install [--uninstall]`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Group, Option
from dlm_git.output import echo

hooks_app = Group(help="Install or remove dlm-git's git hooks.")


@hooks_app.command("install")
def install(
    uninstall: Annotated[bool, Option("--uninstall", help="Remove the hooks instead.")] = False,
) -> None:
    """Install pre-commit, pre-merge-commit and pre-push hooks (chaining any existing hook)."""
    from dlm_git.gitio import toplevel
    from dlm_git.hooks.install import install_hooks

    for line in install_hooks(toplevel(Path.cwd()), uninstall=uninstall):
        echo(line)
