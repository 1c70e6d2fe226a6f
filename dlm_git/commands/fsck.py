"""`dlm-git fsck [--repair [--allow-outside-cache]] [--full] [--json]`: check the DVC cache
objects the history references and the token cache against their own hashes
(`dlm_git.fsck`).

Exit 0 when nothing is corrupted (missing and orphaned objects are reported, never a
failure), 1 while a corrupted object remains (after `--repair`, if given), when a commit
holds a file every reader refuses (a params.yaml nested too deep: reported with the rest
of the history), or when `--repair` is refused for a DVC cache outside the repository
that only the committed config names, 2 for misuse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from dlm_git.clidecl import Exit, Option
from dlm_git.output import echo, emit_json


def fsck(
    repair: Annotated[
        bool,
        Option(
            "--repair",
            help="Move corrupted objects into the quarantine in the git directory"
            " (.git/dlm-git/quarantine/, never deleted) and re-fetch them from this work tree's"
            " default DVC remote.",
        ),
    ] = False,
    allow_outside_cache: Annotated[
        bool,
        Option(
            "--allow-outside-cache",
            help="With --repair: also change a DVC cache outside the repository that only the"
            " committed .dvc/config names (confirm it is yours).",
        ),
    ] = False,
    full: Annotated[
        bool,
        Option("--full", help="Re-hash every object, ignoring the record of what was verified."),
    ] = False,
    as_json: Annotated[bool, Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check every cache object the history references, and the token cache."""
    from dlm_git.errors import UsageError
    from dlm_git.fsck.render import render
    from dlm_git.fsck.run import run_fsck
    from dlm_git.gitio import toplevel

    if allow_outside_cache and not repair:
        raise UsageError("fsck", "--allow-outside-cache is only for --repair", "add --repair")
    root = toplevel(Path.cwd())
    report = run_fsck(root, repair=repair, full=full, allow_outside_cache=allow_outside_cache)
    if as_json:
        emit_json(report.to_json())
    else:
        for line in render(report):
            echo(line)
    if not report.ok:
        raise Exit(1)
