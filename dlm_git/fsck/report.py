"""What `dlm-git fsck` found: states of objects, findings, repairs and the report.

Invariants:
- The verdict (`FsckReport.ok`) is computed from counts of states only, never from detail
  text: false while any corrupted DVC object or token-cache file remains, or while the
  history holds a file every reader refuses (`CommitError`: the error `verify`, `diff`
  and `log` stop on, reported here with the rest of the history); missing and orphaned
  objects never fail.
- A path is shown relative to the repository root when it is inside it, else absolute
  (`display_path`); `--json` (`to_json`, format `FORMAT`) carries every finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from dlm_git.history.references import CommitError, Referrer

FORMAT = "dlm-git/fsck/v1"


class State(StrEnum):
    OK = "ok"
    CORRUPTED = "corrupted"
    MISSING = "missing"
    ORPHANED = "orphaned"


class Area(StrEnum):
    DVC = "dvc-cache"
    TOKENS = "token-cache"


class Outcome(StrEnum):
    REPAIRED = "repaired"
    """Quarantined, re-fetched from the DVC remote, and the new copy is good."""
    QUARANTINED = "quarantined"
    """Quarantined and not replaced (no remote, not on it, or a token-cache file)."""
    STILL_CORRUPTED = "still-corrupted"
    """Quarantined and re-fetched, but the remote's copy is corrupted too."""
    NOT_MOVED = "not-moved"
    """The move into quarantine failed: the object stays where it was."""


def display_path(path: Path, root: Path) -> str:
    """`path` relative to `root` when it is inside it, else absolute."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Finding:
    """One object that is not simply ok."""

    area: Area
    state: State
    path: str
    """Where it is (relative to the repository root when inside it)."""
    md5: str | None
    detail: str
    referrer: Referrer | None
    file: Path = field(compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        ref = self.referrer
        return {
            "area": self.area.value,
            "state": self.state.value,
            "path": self.path,
            "md5": self.md5,
            "detail": self.detail,
            "commit": ref.commit if ref else None,
            "record": ref.record if ref else None,
            "out": ref.out if ref else None,
            "doc": ref.doc if ref else None,
        }


@dataclass(frozen=True)
class Repair:
    area: Area
    path: str
    quarantined_to: str | None
    outcome: Outcome
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "area": self.area.value,
            "path": self.path,
            "quarantine": self.quarantined_to,
            "outcome": self.outcome.value,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class DvcCounts:
    path: str
    referenced: int
    ok: int
    corrupted: int
    missing: int
    orphaned: int


@dataclass(frozen=True)
class TokenCounts:
    path: str
    files: int
    ok: int
    corrupted: int
    other_version: int
    checked: bool
    """False when the training stack (numpy, blake3) is not installed to decode them."""


@dataclass(frozen=True)
class FsckReport:
    commits: int
    dvc: DvcCounts
    tokens: TokenCounts
    hashed: int
    """Files read and hashed or decoded (both passes with --repair)."""
    unchanged: int
    """Files vouched for by the stat record, not re-read."""
    full: bool
    findings: tuple[Finding, ...]
    repairs: tuple[Repair, ...] = ()
    quarantine: str | None = None
    notes: tuple[str, ...] = ()
    errors: tuple[CommitError, ...] = ()
    """Files of the history every reader refuses (each fails the check)."""

    @property
    def ok(self) -> bool:
        return self.dvc.corrupted == 0 and self.tokens.corrupted == 0 and not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "ok": self.ok,
            "commits": self.commits,
            "full": self.full,
            "dvc_cache": vars(self.dvc),
            "token_cache": vars(self.tokens),
            "hashed": self.hashed,
            "unchanged": self.unchanged,
            "objects": [f.to_json() for f in self.findings],
            "repairs": [r.to_json() for r in self.repairs],
            "quarantine": self.quarantine,
            "notes": list(self.notes),
            "errors": [
                {"commit": e.commit, "path": e.path, "error": e.error.one_line()}
                for e in self.errors
            ],
        }
