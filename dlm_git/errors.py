"""Base of every error dlm-git reports to a user.

Invariant: a `DlmGitError` is a *user* error. The CLI prints it as one line
`subject: message (hint: ...)` and exits with `exit_code`,
never with a traceback. Anything else that escapes is a bug and keeps its traceback.
"""

from __future__ import annotations


class DlmGitError(Exception):
    """An error caused by input, state or environment the user can fix."""

    exit_code: int = 1

    def __init__(self, subject: str, message: str, hint: str | None = None) -> None:
        self.subject = subject
        self.message = message
        self.hint = hint
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.subject}: {self.message}" if self.subject else self.message
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class UsageError(DlmGitError):
    """The command line itself is wrong (exit 2)."""

    exit_code = 2
