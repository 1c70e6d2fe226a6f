"""Verification reports: one per document, a verdict and the checks behind it.

Invariant: a report is a pure function of what was checked (no timestamps, no absolute
paths), so the pipeline can commit it as a DVC metric and `dvc repro --force` leaves it
byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from dlm_git.contract.outcome import Check, Outcome

Level = Literal["hash", "replay", "segments"]


class Verdict(StrEnum):
    """Every verdict a document can get (docs/verify.md, "Verdicts and exit codes")."""

    VERIFIED = "VERIFIED"  # hash: every check passed
    FAILED = "FAILED"  # a recomputed value differs from the recorded one
    CANNOT_VERIFY = (
        "CANNOT_VERIFY"  # only absence, or nothing to compare where bits aren't expected
    )
    BITWISE = "BITWISE"  # replay: the recorded adapter bytes came back
    WITHIN_TOLERANCE = "WITHIN_TOLERANCE"  # replay: bits not expected, within the tolerance
    MISMATCH = "MISMATCH"  # a comparison that should have held failed
    SEGMENTS_BITWISE = "SEGMENTS_BITWISE"  # segments: every sampled segment came back


PASSING = frozenset(
    {Verdict.VERIFIED, Verdict.BITWISE, Verdict.WITHIN_TOLERANCE, Verdict.SEGMENTS_BITWISE}
)
STRICT_PASSING = PASSING - {Verdict.WITHIN_TOLERANCE}


def verdict_of(checks: list[Check]) -> Verdict:
    """The hash level's verdict, from the checks' states only: VERIFIED when every check
    passed, FAILED when any failed, else CANNOT_VERIFY (something needed was absent)."""
    if checks and all(c.ok for c in checks):
        return Verdict.VERIFIED
    if not checks or any(c.state is Outcome.FAILED for c in checks):
        return Verdict.FAILED
    return Verdict.CANNOT_VERIFY


def combine(hash_verdict: Verdict, level_verdict: Verdict) -> Verdict:
    """A replay or segments verdict on top of the hash level's: a passing level never
    hides a failed or unverifiable hash level, and a failed hash level is never softened
    to CANNOT_VERIFY."""
    if level_verdict in PASSING and hash_verdict not in PASSING:
        return hash_verdict
    if level_verdict == Verdict.CANNOT_VERIFY and hash_verdict == Verdict.FAILED:
        return Verdict.FAILED
    return level_verdict


@dataclass
class DocReport:
    doc: str
    level: Level
    verdict: Verdict
    checks: list[Check]
    adapter_sha256: str | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict in PASSING

    def passes(self, strict: bool) -> bool:
        """Whether this verdict exits 0: under `--strict` only bit equality passes."""
        return self.verdict in (STRICT_PASSING if strict else PASSING)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "doc": self.doc,
            "level": self.level,
            "verdict": self.verdict,
            "adapter_sha256": self.adapter_sha256,
            "checks": [c.to_json() for c in self.checks],
            "passed": sum(1 for c in self.checks if c.ok),
            "failed": sum(1 for c in self.checks if not c.ok),
        }
        if self.notes:
            out["notes"] = self.notes
        out.update(self.extra)
        return out

    def state_of(self, name: str) -> Outcome | None:
        """The state check `name` ended in (None: it did not run): one lookup for every
        judgement that depends on another check (e.g. a replay on `base.identity`)."""
        return next((c.state for c in self.checks if c.name == name), None)

    def other_tokenizer(self, recorded: str, replayed: str) -> bool:
        """Whether tokens a replay made from the commit's rows are other inputs, not
        evidence: the hash level could not compare the base (`base.identity` ABSENT) and
        the replay's tokenizer digest (`replayed`) is not the recorded one (an
        untemplated record's base with templates). The one rule of a full replay and a
        segment replay alike; with the recorded tokenizer, other tokens accuse."""
        return self.state_of("base.identity") is Outcome.ABSENT and recorded != replayed

    def first_failure(self) -> Check | None:
        return next((c for c in self.checks if not c.ok), None)
