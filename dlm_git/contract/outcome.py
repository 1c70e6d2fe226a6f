"""What a check found: a state set where the check runs, and a detail for people.

Invariants:
- Every check ends in one `Outcome`: OK (the recomputed value equals the recorded one),
  FAILED (it differs, or the record is missing or malformed) or ABSENT (what it needs is
  not on this machine: nothing was compared). A missing or unreadable record is FAILED,
  never a pass and never absence.
- Verdicts and hook levels are computed from states (and the check table), never from
  a detail's text, which may quote names a commit chose.
- A file that is there but not a regular file (a FIFO, a device, a link where none may
  be) is neither absence nor a failed check: `NotRegularFile` leaves every check and
  stops the run with one line naming it (`dvc fetch` replaces a cache object).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dlm_git.errors import DlmGitError
from dlm_git.fsutil import NotRegularFile
from dlm_git.hashing import TextForm, digest_text
from dlm_git.severity import Severity


class Outcome(StrEnum):
    """What a check found, set where the check runs."""

    OK = "ok"  # the recomputed value equals the recorded one
    FAILED = "failed"  # it differs, or the record is missing or malformed
    ABSENT = "absent"  # what it needs is not on this machine (cache object, base): no comparison


MARKS = {Outcome.OK: "ok  ", Outcome.FAILED: "FAIL", Outcome.ABSENT: "n/a "}
"""How a text report marks each state (`n/a`: nothing was compared)."""


@dataclass(frozen=True)
class Check:
    name: str
    """The check's stable id (a row of `contract.table.TABLE`)."""
    state: Outcome
    detail: str
    severity: Severity | None = None
    """Set where the check runs when its row's default does not apply (a lock drift's
    own severity from the drift table); None: the row's."""
    fix: str | None = None
    """How a commit-time finding of it is fixed, when not the row's."""

    @property
    def ok(self) -> bool:
        return self.state is Outcome.OK

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "state": self.state.value, "detail": self.detail}


def passed(name: str, detail: str) -> Check:
    return Check(name, Outcome.OK, detail)


def failed(name: str, detail: str) -> Check:
    return Check(name, Outcome.FAILED, detail)


def absent(name: str, detail: str) -> Check:
    return Check(name, Outcome.ABSENT, detail)


def judged(name: str, ok: bool, detail: str) -> Check:
    """A check that compared: passed or failed."""
    return Check(name, Outcome.OK if ok else Outcome.FAILED, detail)


class CheckFailed(Exception):
    """A recomputed value differs from the recorded one (the message says which and how)."""


class CheckAbsent(Exception):
    """What the check needs (a DVC cache object, the base) is not on this machine: the
    check cannot compare, which is never a pass and never a failure."""


class Checks:
    """The checks of one document, in the order they ran."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Check] = []

    def add(self, name: str, ok: bool, detail: str) -> bool:
        """A check that compared (ok or failed)."""
        self.items.append(judged(name, ok, detail))
        return ok

    def absent(self, name: str, detail: str) -> bool:
        """A check that could not compare: what it needs is not on this machine."""
        self.items.append(absent(name, detail))
        return False

    def run(self, name: str, fn: Callable[[], str]) -> bool:
        """Run `fn`; its return value is the pass detail, a `CheckFailed` the failure, a
        `CheckAbsent` the absence of what it needs (a `DlmGitError` fails, in one line;
        `NotRegularFile` is raised on)."""
        try:
            return self.add(name, True, fn())
        except NotRegularFile:
            raise
        except CheckAbsent as exc:
            return self.absent(name, str(exc))
        except CheckFailed as exc:
            return self.add(name, False, str(exc))
        except DlmGitError as exc:
            return self.add(name, False, exc.one_line())

    def get(self, name: str) -> Check | None:
        return next((c for c in self.items if c.name == name), None)

    @property
    def ok(self) -> bool:
        return bool(self.items) and all(c.ok for c in self.items)


def short(value: str | None) -> str:
    """A recorded string for a detail: a sha256 cut to 16 hex digits, anything else whole
    up to 60 characters (an id cut short could look equal to the one it differs from)."""
    if value is None:
        return "none"
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:16]
    return value if len(value) <= 60 else value[:57] + "..."


def expect_equal(what: str, recorded: Any, actual: Any) -> None:
    """Raise `CheckFailed` unless `recorded` is there and equals `actual`."""
    if recorded is None:
        raise CheckFailed(f"{what}: nothing recorded")
    if recorded != actual:
        if isinstance(recorded, str) and isinstance(actual, str):
            raise CheckFailed(f"{what}: recorded {short(recorded)} but found {short(actual)}")
        raise CheckFailed(f"{what}: recorded {recorded!r:.80} but found {actual!r:.80}")


def expect_text(what: str, recorded: object, data: bytes) -> str:
    """A recorded digest of a text input (`.dlm`, lock) against its bytes: of their
    canonical form (CRLF as LF, `hashing.canonical_text`, so an LF and a CRLF checkout
    agree), or, in a record made before that rule, of the raw bytes. The pass detail."""
    digest = digest_text(data)
    form = digest.form_of(recorded)
    if form is None:
        expect_equal(what, recorded, digest.sha256)  # raises: they differ
    if form is TextForm.RAW:
        return (
            f"{digest.raw_sha256[:16]} (of the raw bytes: a record from before CRLF was read as LF)"
        )
    return digest.sha256[:16]
