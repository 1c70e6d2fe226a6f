"""`dlm-git init [--doc NAME]`: DVC pipeline, params, a starter document, git hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Option
from dlm_git.output import echo


def init(
    doc: Annotated[
        str | None, Option("--doc", help="Scaffold NAME/NAME.dlm and add it to params.")
    ] = None,
    no_hooks: Annotated[bool, Option("--no-hooks", help="Don't install the git hooks.")] = False,
    sign: Annotated[
        bool, Option("--sign", help="Add the sign@<doc> stage (signs when a key is configured).")
    ] = False,
) -> None:
    """Set up the dlm-git pipeline in this git repository (idempotent)."""
    from dlm_git.pipeline.init import run_init

    result = run_init(Path.cwd(), doc, install_hooks=not no_hooks, sign=sign)
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)
    for note in result.notes:
        echo(f"dlm-git init: {note}")
    if not result.changes:
        echo("dlm-git init: nothing to do, already set up")
        return
    for change in result.changes:
        echo(f"dlm-git init: {change}")
    echo("next: `dvc repro`, then `git add -A && git commit`")
