"""`dlm-git verify [COMMIT] [--doc PATH] [--level hash|replay|segments] ...`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dlm_git.errors import DlmGitError, UsageError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json
from dlm_git.layout import ADAPTER_DIR, DOC_OUTS
from dlm_git.output import echo, emit_json

if TYPE_CHECKING:
    from dlm_git.verify.report import DocReport

LEVELS = ("hash", "replay", "segments")


def verify(
    commit: str = typer.Argument("HEAD", metavar="[COMMIT]", help="The commit to verify."),
    doc: Path = typer.Option(None, "--doc", help="Only this document (file or directory)."),
    level: str = typer.Option("hash", "--level", help="hash, replay or segments."),
    worktree: bool = typer.Option(
        False, "--worktree", help="Verify the working tree instead of a commit (needs --doc)."
    ),
    no_dvc: bool = typer.Option(False, "--no-dvc", help="With --worktree: skip dvc.lock checks."),
    report: Path = typer.Option(None, "--report", help="Also write the JSON report here."),
    tiny_dir: Path = typer.Option(None, "--tiny-dir", help="Built tiny base directory."),
    sample: int = typer.Option(2, "--sample", help="With --level segments: segments to replay."),
    seed: int = typer.Option(None, "--seed", help="With --level segments: sampling seed."),
    tolerance: float = typer.Option(
        None,
        "--tolerance",
        help="With --level replay: compare within this relative L2 distance per tensor when"
        " bit equality is not expected (yours; never read from the commit). Without it such"
        " a replay is CANNOT_VERIFY.",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Only VERIFIED, BITWISE and SEGMENTS_BITWISE pass: WITHIN_TOLERANCE exits 1.",
    ),
    accept_license: bool = typer.Option(
        False,
        "--accept-license",
        help="With --level replay: accept the base model's license for the re-training.",
    ),
    require_signature: bool = typer.Option(
        False,
        "--require-signature",
        help="A missing or untrusted signature fails (default: reported). Trusted keys:"
        " git config dlm-git.trustedKeys and .dlm-keys/ in the commit's parent.",
    ),
    fetch: bool = typer.Option(
        False,
        "--fetch",
        help="Fetch the adapter (and, for --level segments, the segments) from this work"
        " tree's DVC remote where the cache lacks them.",
    ),
    remote: str = typer.Option(
        None,
        "--remote",
        help="With --fetch: fetch from this remote of your own DVC config (.dvc/config.local,"
        " global or system), not the default the checked-out .dvc/config may set.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Prove that recorded hashes are what the inputs and outputs really are."""
    if level not in LEVELS:
        raise UsageError("verify", f"unknown --level '{level}'", "use hash, replay or segments")
    if tolerance is not None:
        from dlm_git.verify.replay import check_tolerance

        check_tolerance(tolerance)
        if level != "replay":
            raise UsageError("verify", "--tolerance goes with --level replay", "drop --tolerance")
    if sample < 1:
        # 0 would replay nothing yet report SEGMENTS_BITWISE: refused, not redefined
        raise UsageError(
            "verify", f"--sample {sample}: must be at least 1", "use --sample 1 or more"
        )
    if report is not None and (report.is_dir() or report.exists() and not report.is_file()):
        raise UsageError("verify", f"--report {report}: not a regular file", "give a file path")
    if worktree:
        if doc is None:
            raise UsageError("verify", "--worktree needs --doc PATH")
        if level != "hash":
            raise UsageError("verify", "--worktree supports --level hash only")
        if fetch or remote is not None:
            raise UsageError(
                "verify", "--fetch verifies a commit", "use `dvc pull` for the work tree"
            )
        from dlm_git.verify.worktree import verify_worktree

        reports = [verify_worktree(doc, use_dvc=not no_dvc, tiny_dir=tiny_dir)]
    else:
        from dlm_git.gitio import resolve_commit, toplevel
        from dlm_git.verify.commit import verify_commit
        from dlm_git.verify.fetch import fetch_from

        root = toplevel(Path.cwd())
        source = fetch_from(root, fetch, remote, "verify")
        # resolved once: a branch that moves during a long replay changes nothing here
        sha = resolve_commit(commit, root)
        rev = sha or commit  # an unresolvable one is reported by verify_commit
        outs = DOC_OUTS if level == "segments" else (ADAPTER_DIR,)
        reports = verify_commit(
            root,
            rev,
            doc,
            require_signature=require_signature,
            fetch=outs if source is not None else (),
            source=source,
        )
        if level != "hash":
            from dlm_git.verify.replay import replay_reports

            reports = replay_reports(
                root, rev, reports, level, sample, seed, tolerance, accept_license
            )
        if sha is not None:
            from dlm_git.verify.verdicts import remember

            remember(root, sha, reports)  # this machine's verdicts, for `dlm-git log`
    finish(reports, report, as_json, strict)


def finish(
    reports: list[DocReport], report: Path | None, as_json: bool, strict: bool = False
) -> None:
    passing = all(r.passes(strict) for r in reports)
    payload = {
        "verdict": "VERIFIED" if passing else "FAILED",
        "documents": [r.to_json() for r in reports],
    }
    if report is not None:
        try:
            atomic_write_bytes(report, canonical_json(payload))
        except OSError as exc:
            raise DlmGitError(str(report), f"cannot write the report ({exc.strerror})") from None
    if as_json:
        emit_json(payload)
    else:
        print_table(reports)
    if not passing:
        raise typer.Exit(1)


def print_table(reports: list[DocReport]) -> None:
    from dlm_git.contract.outcome import MARKS

    """One line per check, note and verdict; names and details are the commit's text,
    so every line goes through `echo` (control characters escaped)."""
    for r in reports:
        for c in r.checks:
            echo(f"{r.doc:<24} {c.name:<20} {MARKS[c.state]} {c.detail}")
        for note in r.notes:
            echo(f"{r.doc:<24} {'note':<20}      {note}")
        echo(f"{r.doc:<24} {'verdict':<20} {r.verdict}")
