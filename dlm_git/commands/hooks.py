"""`dlm-git hooks install [--uninstall]`."""

from __future__ import annotations

from pathlib import Path

import typer

from dlm_git.output import echo

hooks_app = typer.Typer(
    help="Install or remove dlm-git's git hooks.", no_args_is_help=True, rich_markup_mode=None
)


@hooks_app.command("install")
def install(
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove the hooks instead."),
) -> None:
    """Install pre-commit, pre-merge-commit and pre-push hooks (chaining any existing hook)."""
    from dlm_git.gitio import toplevel
    from dlm_git.hooks.install import install_hooks

    for line in install_hooks(toplevel(Path.cwd()), uninstall=uninstall):
        echo(line)
