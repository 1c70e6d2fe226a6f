"""`dlm-git fsck [--repair] [--full] [--json]`: check the DVC cache objects the history
references and the token cache against their own hashes (`dlm_git.history.fsck`).

Exit 0 when nothing is corrupted (missing and orphaned objects are reported, never a
failure), 1 while a corrupted object remains (after `--repair`, if given), 2 for misuse.
"""

from __future__ import annotations

from pathlib import Path

import typer

from dlm_git.output import emit_json


def fsck(
    repair: bool = typer.Option(
        False,
        "--repair",
        help="Move corrupted objects into .dlm-git/quarantine/ (never deleted) and re-fetch"
        " them from this work tree's default DVC remote.",
    ),
    full: bool = typer.Option(
        False, "--full", help="Re-hash every object, ignoring the record of what was verified."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Check every cache object the history references, and the token cache."""
    from dlm_git.gitio import toplevel
    from dlm_git.history.fsck import render, run_fsck

    root = toplevel(Path.cwd())
    report = run_fsck(root, repair=repair, full=full)
    if as_json:
        emit_json(report.to_json())
    else:
        for line in render(report):
            typer.echo(line)
    if not report.ok:
        raise typer.Exit(1)
