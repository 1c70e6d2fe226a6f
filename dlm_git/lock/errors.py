"""Errors about `dlm.lock` files."""

from __future__ import annotations

from dlm_git.errors import DlmGitError


class LockError(DlmGitError):
    """A lock file is corrupt, of an unknown version, or otherwise unreadable."""


class LockValidationError(DlmGitError):
    """The current environment drifts from the lock at ERROR severity."""

    def __init__(self, subject: str, reasons: list[str], hint: str) -> None:
        self.reasons = reasons
        super().__init__(subject, "lock validation failed: " + "; ".join(reasons), hint)
