"""The human output of `dlm-git fsck`: counts, the history's errors, one line per problem,
repairs, notes and the verdict.

Invariants:
- Every value that came from a commit or a cache (paths, record names, details, notes) is
  made fit for a terminal line (`dlm_git.output.printable`) and cut to a line's worth.
- Corrupted objects are always all listed; missing and orphaned ones are cut at
  `LIST_LIMIT` each (`--json` has all).
"""

from __future__ import annotations

from dlm_git.fsck.report import FsckReport, State
from dlm_git.history.references import Referrer
from dlm_git.output import printable

LIST_LIMIT = 20
"""Missing and orphaned objects shown per kind in the human output (`--json` has all)."""


def _safe(text: str, limit: int = 200) -> str:
    """A value from a commit, fit for a terminal line (`printable`), cut to `limit`."""
    clean = printable(text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def _where(ref: Referrer | None) -> str:
    if ref is None:
        return ""
    doc = f" (doc {_safe(ref.doc)})" if ref.doc else ""
    at = f"commit {ref.commit[:12]}" if ref.commit else "the work tree"
    return f" <- {_safe(ref.out)}{doc}, {_safe(ref.record)} at {at}"


def _counts(report: FsckReport) -> list[str]:
    d, t = report.dvc, report.tokens
    other = f", {t.other_version} of another version" if t.other_version else ""
    tokens = f"{t.files} files: {t.ok} ok, {t.corrupted} corrupted{other}"
    return [
        f"history     {report.commits} commits",
        f"dvc cache   {d.path}: {d.referenced} objects referenced: {d.ok} ok, "
        f"{d.corrupted} corrupted, {d.missing} missing; {d.orphaned} orphaned",
        f"token cache {t.path}: " + (tokens if t.checked else f"{t.files} files, not checked"),
        f"checked     {report.hashed} files hashed, {report.unchanged} unchanged since verified"
        + (" (--full: stat record ignored)" if report.full else ""),
    ]


def _problems(report: FsckReport) -> list[str]:
    lines = []
    shown: dict[State, int] = {}
    for f in report.findings:
        n = shown[f.state] = shown.get(f.state, 0) + 1
        if f.state is not State.CORRUPTED and n > LIST_LIMIT:
            continue
        lines.append(f"{f.state.value:<11} {f.path}: {_safe(f.detail)}{_where(f.referrer)}")
    for state, n in shown.items():
        if state is not State.CORRUPTED and n > LIST_LIMIT:
            lines.append(f"{state.value:<11} ... and {n - LIST_LIMIT} more (--json lists all)")
    return lines


def render(report: FsckReport) -> list[str]:
    """The human summary: counts, the history's errors (the line every other reader gives
    for that commit), then one line per problem object (missing and orphaned ones cut at
    `LIST_LIMIT` each), repairs, notes and the verdict."""
    lines = _counts(report)
    lines += [f"error       {_safe(e.error.one_line(), 300)}" for e in report.errors]
    lines += _problems(report)
    for r in report.repairs:
        to = f" -> {r.quarantined_to}" if r.quarantined_to else ""
        lines.append(f"{r.outcome.value:<11} {r.path}{to}: {r.detail}")
    lines += [f"note        {_safe(n, 300)}" for n in report.notes]
    if report.dvc.missing:
        lines.append(
            "note        missing objects are not an error: the DVC cache holds what was"
            " pulled (`dvc fetch` brings the rest)"
        )
    lines.append(_verdict(report))
    return lines


def _verdict(report: FsckReport) -> str:
    if report.ok:
        return "fsck        OK"
    bad, errors = report.dvc.corrupted + report.tokens.corrupted, len(report.errors)
    why = [f"{bad} corrupted"] if bad else []
    why += [f"{errors} error{'s' if errors > 1 else ''} in the history"] if errors else []
    repair = bad > 0 and not report.repairs
    return f"fsck        FAILED: {', '.join(why)}" + (
        " (dlm-git fsck --repair moves them aside and re-fetches)" if repair else ""
    )
