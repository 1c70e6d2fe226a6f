"""Severities, and strict mode's one rule.

Invariants:
- A severity says how a finding is treated, as git fsck's are: `ERROR` refuses (the
  commit, the merge, the training run), `WARN` is reported and allowed, `IGNORE` says
  nothing. The check table (`contract.table`) gives each check its severity at commit
  time; the lock drift table (`lock.policy`) classifies drift as ERROR or WARN (or ALLOW:
  not a finding).
- Strict mode is one rule, stated here only (`Severity.strict`): every WARN becomes an
  ERROR, nothing else changes. The lock drift decision (`lock.decision.judge`, for
  `train --strict-lock`) and the hooks (over all of a run's findings, once, after the
  severities a user set per check) apply it through this method.
- Depends on nothing, so every layer that judges may name it.
"""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """How a finding is treated (git fsck's `error`, `warn`, `ignore`)."""

    ERROR = "ERROR"
    WARN = "WARN"
    IGNORE = "IGNORE"

    def strict(self, on: bool) -> Severity:
        """This severity under strict mode (`on`): a WARN is an ERROR."""
        return Severity.ERROR if on and self is Severity.WARN else self
