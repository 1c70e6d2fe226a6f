"""`dlm-git fsck` end to end: check both caches, repair if asked, and report.

Invariants:
- One check reads the history's references once (`dlm_git.history.references`), checks
  the DVC cache (`dlm_git.fsck.dvc`) and the token cache (`dlm_git.fsck.tokens`) in one
  pass over one stat record, and saves the record; findings are sorted corrupted, missing,
  orphaned, then by area and path.
- `--repair` (`dlm_git.fsck.repair`) quarantines each corrupted file, re-fetches the
  quarantined DVC objects, exactly those md5s, from the work tree's default DVC remote
  (`dlm_git.verify.fetch.pull_objects`), and checks everything again: what is reported is
  the state after the repair. A re-fetched `.dir` object can reveal entries not checked
  before: up to `REPAIR_ROUNDS` rounds, each repairing only what no earlier round tried.
- Exit status (`FsckReport.ok`): 1 while any corrupted object or token-cache file remains,
  or a commit holds a file every reader refuses (`references.CommitError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from dlm_git.cache.layout import default_cache_dir
from dlm_git.dvcfiles import cache_dir
from dlm_git.fsck.dvc import check_dvc
from dlm_git.fsck.repair import (
    check_repairable,
    move_aside,
    outcome,
    quarantine_dir,
    write_manifest,
)
from dlm_git.fsck.report import (
    Area,
    DvcCounts,
    Finding,
    FsckReport,
    Repair,
    State,
    TokenCounts,
    display_path,
)
from dlm_git.fsck.scan import Pass, stat_record
from dlm_git.fsck.tokens import check_tokens
from dlm_git.history.references import CommitError, collect

REPAIR_ROUNDS = 3
"""A `.dir` listing re-fetched in one round names files the next round checks first."""
ORDER = {State.CORRUPTED: 0, State.MISSING: 1, State.ORPHANED: 2, State.OK: 3}


@dataclass(frozen=True)
class _Result:
    commits: int
    dvc: DvcCounts
    tokens: TokenCounts
    findings: list[Finding]
    notes: list[str]
    errors: list[CommitError]
    hashed: int
    unchanged: int


def _check(root: Path, full: bool) -> _Result:
    record = stat_record(root, full)
    run = Pass(root, record)
    cache = cache_dir(root)
    refs = collect(root, cache)
    run.notes += refs.notes
    dvc = check_dvc(run, refs, cache)
    tokens = check_tokens(run, default_cache_dir(root))
    if record.damaged:
        run.notes.append(f"{run.display(record.path)} was damaged: ignored and rewritten")
    problem = record.save()
    if problem is not None:
        run.notes.append(f"stat record {problem}")
    run.findings.sort(key=lambda f: (ORDER[f.state], f.area.value, f.path))
    return _Result(
        refs.commits, dvc, tokens, run.findings, run.notes, refs.errors, run.hashed, run.unchanged
    )


@dataclass
class _Repairs:
    """The rounds of one `--repair`: what was moved where, and why."""

    root: Path
    quarantine: Path | None = None
    moved: list[tuple[Finding, Path | None, str, str | None]] = field(default_factory=list)
    attempted: set[tuple[Area, str]] = field(default_factory=set)

    def round(self, result: _Result, notes: list[str]) -> bool:
        """Move aside what is corrupted and no earlier round tried, re-fetch its DVC
        objects; False when there was nothing to try."""
        corrupted = [
            f
            for f in result.findings
            if f.state is State.CORRUPTED and (f.area, f.path) not in self.attempted
        ]
        if not corrupted:
            return False
        self.quarantine = self.quarantine or quarantine_dir(self.root)
        this_round = [move_aside(f, self.root, self.quarantine) for f in corrupted]
        self.attempted |= {(f.area, f.path) for f in corrupted}
        wanted = [f.md5 for f, dest, _ in this_round if dest and f.area is Area.DVC and f.md5]
        fetch_note: str | None = None
        if wanted:
            from dlm_git.verify.fetch import pull_objects

            fetch_note = pull_objects(self.root, wanted)
            if fetch_note is not None:
                notes.append(f"--repair: re-fetch from the DVC remote failed: {fetch_note}")
        self.moved += [(f, dest, why, fetch_note) for f, dest, why in this_round]
        return True

    def outcomes(self, result: _Result) -> tuple[Repair, ...]:
        """Write the quarantine's manifest; each move's outcome, judged by `result`."""
        assert self.quarantine is not None
        write_manifest(self.quarantine, self.root, [(f, dest) for f, dest, _, _ in self.moved])
        after = {(f.area, f.path): f for f in result.findings}
        return tuple(
            outcome(f, dest, why, after, note, self.root) for f, dest, why, note in self.moved
        )


def run_fsck(
    root: Path, *, repair: bool = False, full: bool = False, allow_outside_cache: bool = False
) -> FsckReport:
    """Check the DVC cache against the history and the token cache against its checksums;
    with `repair`, quarantine what is corrupted, re-fetch it, and check again (refused
    before anything is read or written when the DVC cache is not the auditor's to change:
    `check_repairable`)."""
    if repair:
        check_repairable(root, allow_outside_cache)
    result = _check(root, full)
    hashed, unchanged, notes = result.hashed, result.unchanged, list(result.notes)
    repairs = _Repairs(root)
    for _ in range(REPAIR_ROUNDS if repair else 0):
        if not repairs.round(result, notes):
            break
        result = _check(root, full=False)
        hashed, unchanged = hashed + result.hashed, unchanged + result.unchanged
        notes += result.notes
    report = FsckReport(
        commits=result.commits,
        dvc=result.dvc,
        tokens=result.tokens,
        hashed=hashed,
        unchanged=unchanged,
        full=full,
        findings=tuple(result.findings),
        notes=tuple(notes),
        errors=tuple(result.errors),
    )
    if repairs.quarantine is None:
        return report
    return replace(
        report,
        repairs=repairs.outcomes(result),
        quarantine=display_path(repairs.quarantine, root),
        notes=tuple(dict.fromkeys(notes)),
    )
