"""`dlm-git verify [COMMIT] [--doc PATH] [--level hash|replay|segments] ...`.

Invariant: the command line is checked here, before anything is read (misuse exits 2);
the verdicts are `dlm_git.verify`'s. Exit 0 only when every document's verdict passes
(`--strict`: only bit equality passes), else 1; `--json` and `--report` carry the same
payload, save that only `--json` names the verifier that ran (`verifier`,
`dlm_git.selfid`): the pipeline commits the `--report` file as `verify.json`, and a
record naming dlm-git's code would drift with every change of that code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

from dlm_git.clidecl import Argument, Exit, Option
from dlm_git.errors import DlmGitError, UsageError
from dlm_git.fsutil import atomic_write_bytes
from dlm_git.hashing import canonical_json
from dlm_git.layout import ADAPTER_DIR, DOC_OUTS
from dlm_git.output import echo, emit_json

if TYPE_CHECKING:
    from dlm_git.verify.report import DocReport

LEVELS = ("hash", "replay", "segments")


_Commit = Annotated[str, Argument(metavar="COMMIT", help="The commit to verify.")]
_Doc = Annotated[Path | None, Option("--doc", help="Only this document (file or directory).")]
_Level = Annotated[str, Option("--level", help="hash, replay or segments.")]
_Worktree = Annotated[
    bool,
    Option("--worktree", help="Verify the working tree instead of a commit (needs --doc)."),
]
_NoDvc = Annotated[bool, Option("--no-dvc", help="With --worktree: skip dvc.lock checks.")]
_Report = Annotated[Path | None, Option("--report", help="Also write the JSON report here.")]
_TinyDir = Annotated[Path | None, Option("--tiny-dir", help="Built tiny base directory.")]
_Sample = Annotated[int, Option("--sample", help="With --level segments: segments to replay.")]
_Seed = Annotated[int | None, Option("--seed", help="With --level segments: sampling seed.")]
_Tolerance = Annotated[
    float | None,
    Option(
        "--tolerance",
        help="With --level replay: compare within this relative L2 distance per tensor when"
        " bit equality is not expected (yours; never read from the commit). Without it such"
        " a replay is CANNOT_VERIFY.",
    ),
]
_Strict = Annotated[
    bool,
    Option(
        "--strict",
        help="Only VERIFIED, BITWISE and SEGMENTS_BITWISE pass: WITHIN_TOLERANCE exits 1.",
    ),
]
_AcceptLicense = Annotated[
    bool,
    Option(
        "--accept-license",
        help="With --level replay: accept the base model's license for the re-training.",
    ),
]
_RequireSignature = Annotated[
    bool,
    Option(
        "--require-signature",
        help="A missing or untrusted signature fails (default: reported). Trusted keys:"
        " git config dlm-git.trustedKeys and .dlm-keys/ in the commit's parent.",
    ),
]
_Fetch = Annotated[
    bool,
    Option(
        "--fetch",
        help="Fetch the adapter (and, for --level segments, the segments) from this work"
        " tree's DVC remote where the cache lacks them.",
    ),
]
_Remote = Annotated[
    str | None,
    Option(
        "--remote",
        help="With --fetch: fetch from this remote of your own DVC config (.dvc/config.local,"
        " global or system), not the default the checked-out .dvc/config may set.",
    ),
]
_AsJson = Annotated[bool, Option("--json", help="Machine-readable output.")]


class Asked(NamedTuple):
    """The level asked for (`name`) and what a replay or segments level takes."""

    name: str
    sample: int
    seed: int | None
    tolerance: float | None
    accept_license: bool


def verify(
    commit: _Commit = "HEAD",
    doc: _Doc = None,
    level: _Level = "hash",
    worktree: _Worktree = False,
    no_dvc: _NoDvc = False,
    report: _Report = None,
    tiny_dir: _TinyDir = None,
    sample: _Sample = 2,
    seed: _Seed = None,
    tolerance: _Tolerance = None,
    strict: _Strict = False,
    accept_license: _AcceptLicense = False,
    require_signature: _RequireSignature = False,
    fetch: _Fetch = False,
    remote: _Remote = None,
    as_json: _AsJson = False,
) -> None:
    """Prove that recorded hashes are what the inputs and outputs really are."""
    asked = Asked(level, sample, seed, tolerance, accept_license)
    _check_options(asked, report)
    if worktree:
        reports = [_verify_worktree(doc, level, no_dvc, tiny_dir, fetch or remote is not None)]
    else:
        reports = _verify_commit(commit, doc, asked, require_signature, fetch, remote)
    finish(reports, report, as_json, strict)


def _check_options(asked: Asked, report: Path | None) -> None:
    """Misuse of the options every target shares (exit 2 before anything is read)."""
    if asked.name not in LEVELS:
        raise UsageError(
            "verify", f"unknown --level '{asked.name}'", "use hash, replay or segments"
        )
    if asked.tolerance is not None:
        from dlm_git.verify.replay import check_tolerance

        check_tolerance(asked.tolerance)
        if asked.name != "replay":
            raise UsageError("verify", "--tolerance goes with --level replay", "drop --tolerance")
    if asked.sample < 1:
        # 0 would replay nothing yet report SEGMENTS_BITWISE: refused, not redefined
        raise UsageError(
            "verify", f"--sample {asked.sample}: must be at least 1", "use --sample 1 or more"
        )
    if report is not None and (report.is_dir() or report.exists() and not report.is_file()):
        raise UsageError("verify", f"--report {report}: not a regular file", "give a file path")


def _verify_worktree(
    doc: Path | None, level: str, no_dvc: bool, tiny_dir: Path | None, fetching: bool
) -> DocReport:
    """`--worktree`: one document at the hash level, from this machine's files."""
    if doc is None:
        raise UsageError("verify", "--worktree needs --doc PATH")
    if level != "hash":
        raise UsageError("verify", "--worktree supports --level hash only")
    if fetching:
        raise UsageError("verify", "--fetch verifies a commit", "use `dvc pull` for the work tree")
    from dlm_git.verify.worktree import verify_worktree

    return verify_worktree(doc, use_dvc=not no_dvc, tiny_dir=tiny_dir)


def _verify_commit(
    commit: str,
    doc: Path | None,
    asked: Asked,
    require_signature: bool,
    fetch: bool,
    remote: str | None,
) -> list[DocReport]:
    """The commit's reports at the hash level, then at the level asked for; remembered
    (this machine's verdicts, for `dlm-git log`) when the commit resolved."""
    from dlm_git.gitio import resolve_commit, toplevel
    from dlm_git.verify.commit import verify_commit
    from dlm_git.verify.fetch import fetch_from

    root = toplevel(Path.cwd())
    source = fetch_from(root, fetch, remote, "verify")
    # resolved once: a branch that moves during a long replay changes nothing here
    sha = resolve_commit(commit, root)
    rev = sha or commit  # an unresolvable one is reported by verify_commit
    outs = DOC_OUTS if asked.name == "segments" else (ADAPTER_DIR,)
    reports = verify_commit(
        root,
        rev,
        doc,
        require_signature=require_signature,
        fetch=outs if source is not None else (),
        source=source,
    )
    if asked.name != "hash":
        from dlm_git.verify.replay import replay_reports

        reports = replay_reports(
            root,
            rev,
            reports,
            asked.name,
            asked.sample,
            asked.seed,
            asked.tolerance,
            asked.accept_license,
        )
    if sha is not None:
        from dlm_git.selfid import identity
        from dlm_git.verify.verdicts import remember

        remember(root, sha, reports, identity())
    return reports


def finish(
    reports: list[DocReport], report: Path | None, as_json: bool, strict: bool = False
) -> None:
    from dlm_git.verify.report import Verdict

    passing = all(r.passes(strict) for r in reports)
    payload = {
        "verdict": Verdict.VERIFIED if passing else Verdict.FAILED,
        "documents": [r.to_json() for r in reports],
    }
    if report is not None:
        try:
            atomic_write_bytes(report, canonical_json(payload))
        except OSError as exc:
            raise DlmGitError(str(report), f"cannot write the report ({exc.strerror})") from None
    if as_json:
        from dlm_git.selfid import identity

        emit_json({**payload, "verifier": identity().to_json()})
    else:
        print_table(reports)
    if not passing:
        raise Exit(1)


def print_table(reports: list[DocReport]) -> None:
    """One line per check, note and verdict; names and details are the commit's text,
    so every line goes through `echo` (control characters escaped)."""
    from dlm_git.contract.outcome import MARKS

    for r in reports:
        for c in r.checks:
            echo(f"{r.doc:<24} {c.name:<20} {MARKS[c.state]} {c.detail}")
        for note in r.notes:
            echo(f"{r.doc:<24} {'note':<20}      {note}")
        echo(f"{r.doc:<24} {'verdict':<20} {r.verdict}")
