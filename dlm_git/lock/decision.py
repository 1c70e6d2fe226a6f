"""The lock decision: what drift between a recorded lock and a fresh one means, and which
lock to write. One place, used by `train` and by the pre-commit hook, each of which only
renders the decision (an error, stderr lines, hook findings).

Invariants:
- Findings come from the one policy table (`lock.policy.classify`). Strict mode's one
  rule is `Severity.strict` (`dlm_git.severity`: every WARN an ERROR), applied once per
  run: here for a training run (`lock_to_write` in `strict` mode); for a hook run, by
  the hook to all of its findings at the end, never to its drift here as well.
- Drift is *accepted* only by a lock whose `supersedes` is the sha256 of the exact bytes
  of the lock it replaces (`--update-lock` writes it): accepted ERRORs are not errors,
  WARNs are still reported.
- Works on the locks' plain JSON forms, so the hook needs no pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from dlm_git.lock.policy import Finding, classify
from dlm_git.severity import Severity

if TYPE_CHECKING:
    from dlm_git.lock.schema import Lock

LockMode = Literal["default", "strict", "update", "ignore"]


@dataclass(frozen=True)
class LockDecision:
    errors: tuple[Finding, ...]
    """Drift that refuses the run or the commit (in strict mode its WARN-class drift too:
    a finding keeps the table's class, the decision is where it lands)."""
    warnings: tuple[Finding, ...]
    """Drift that is reported and allowed."""
    accepted: bool = False
    """The drift was accepted by `supersedes` (errors are then empty)."""

    @property
    def ok(self) -> bool:
        return not self.errors


def judge(
    prior: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    strict: bool = False,
    prior_sha256: str | None = None,
) -> LockDecision:
    """Every difference between `prior` and `current`, judged (`strict`: WARNs refuse
    too). `prior_sha256`: the sha256 of `prior`'s bytes, when a `supersedes` in
    `current` may accept drift."""
    judged = [
        (f, Severity(f.severity).strict(strict))
        for f in classify(prior, current)
        if f.severity != "ALLOW"
    ]
    accepted = prior_sha256 is not None and current.get("supersedes") == prior_sha256
    errors = () if accepted else tuple(f for f, level in judged if level is Severity.ERROR)
    return LockDecision(errors, tuple(f for f, level in judged if level is Severity.WARN), accepted)


def lock_to_write(prior: Lock | None, current: Lock, mode: LockMode) -> tuple[Lock, LockDecision]:
    """The lock a training run writes (with the right `supersedes`) and the decision.

    default: ERROR refuses, WARN is reported; strict: WARN refuses too; update: no
    validation, `supersedes` records the replaced lock; ignore: no validation."""
    if prior is None or mode == "ignore":
        return current, LockDecision((), ())
    if mode == "update":
        if prior.without_supersedes() == current:
            return prior, LockDecision((), ())
        return current.model_copy(update={"supersedes": prior.sha256()}), LockDecision((), ())
    decision = judge(
        prior.model_dump(mode="json"),
        current.model_dump(mode="json"),
        strict=mode == "strict",
    )
    # Only ALLOW/WARN differences: keep an accepted `supersedes` when nothing else moved.
    return (prior if prior.without_supersedes() == current else current), decision
