"""Base of every error dlm-git reports to a user.

Invariant: a `DlmGitError` is a *user* error. The CLI prints it as one line
`subject: message (hint: ...)` and exits with `exit_code`,
never with a traceback. Anything else that escapes is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno


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


class EnvironmentFailure(DlmGitError):
    """The machine refused an operation (disk full, permission denied, a file removed
    while in use): a one-line error, not a traceback. Outputs are written atomically, so
    what was there before is still there."""

    HINTS = {
        errno.ENOSPC: "free disk space and re-run; existing outputs were left as they were",
        errno.EDQUOT: "free disk quota and re-run; existing outputs were left as they were",
        errno.EFBIG: "the file size limit was reached; raise it (ulimit -f) and re-run",
        errno.EACCES: "check the permissions of that path",
        errno.EPERM: "check the permissions of that path",
        errno.EROFS: "the file system is read-only; work in a writable checkout",
        errno.ENOENT: "a file or directory disappeared while in use; restore it and re-run",
    }

    @classmethod
    def from_os_error(cls, exc: OSError) -> EnvironmentFailure:
        subject = str(exc.filename) if exc.filename is not None else "dlm-git"
        message = exc.strerror or str(exc) or type(exc).__name__
        return cls(subject, message, cls.HINTS.get(exc.errno or 0, "check the path and re-run"))


class UsageError(DlmGitError):
    """The command line itself is wrong (exit 2)."""

    exit_code = 2
