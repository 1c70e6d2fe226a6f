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
        errno.EBADF: "run it with standard output and standard error open, not closed with >&-",
    }

    @classmethod
    def from_os_error(cls, exc: OSError) -> EnvironmentFailure:
        subject = str(exc.filename) if exc.filename is not None else "dlm-git"
        message = exc.strerror or str(exc) or type(exc).__name__
        return cls(subject, message, cls.HINTS.get(exc.errno or 0, "check the path and re-run"))


class UsageError(DlmGitError):
    """The command line itself is wrong (exit 2)."""

    exit_code = 2


TRAIN_INSTALL = "pip install 'dlm-git[train]'"
# Top-level modules of the `train` extra (and what they pull in that dlm-git imports): a
# core install (`pip install dlm-git`) has none of them.
TRAINING_STACK = frozenset(
    {
        "accelerate",
        "blake3",
        "dvc",
        "huggingface_hub",
        "numpy",
        "peft",
        "ruamel",
        "safetensors",
        "tokenizers",
        "torch",
        "transformers",
    }
)


class TrainingStackMissing(DlmGitError):
    """A command that trains, tokenizes, builds a base, replays or drives DVC was run on a
    core install (`pip install dlm-git`) that lacks the `train` extra."""

    def __init__(self, subject: str, module: str) -> None:
        super().__init__(
            subject, f"needs the training stack ({module} is not installed)", TRAIN_INSTALL
        )

    @classmethod
    def from_import_error(cls, exc: ImportError, subject: str) -> TrainingStackMissing | None:
        """The user error for a failed import of a training-stack module; None for any other
        import failure (a bug, or a broken install, which keeps its traceback)."""
        module = missing_stack_module(exc)
        return None if module is None else cls(subject, module)


def missing_stack_module(exc: BaseException) -> str | None:
    """The training-stack module (top level) whose absence raised `exc`; None if `exc` is
    anything else."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".", 1)[0]
    return top if top in TRAINING_STACK else None


def require_training_stack(subject: str, *modules: str) -> None:
    """Refuse now, before anything is written, when one of `modules` (training-stack
    modules a command needs in a subprocess or behind a broad `except`) is not installed."""
    from importlib.util import find_spec

    for module in modules:
        try:
            found = find_spec(module) is not None
        except ModuleNotFoundError:  # a missing parent package (`ruamel` of `ruamel.yaml`)
            found = False
        if not found:
            raise TrainingStackMissing(subject, module.split(".", 1)[0])


def training_stack_installed() -> bool:
    """Whether the `train` extra's core modules are importable (without importing them)."""
    try:
        require_training_stack("dlm-git", "torch", "transformers", "tokenizers")
    except TrainingStackMissing:
        return False
    return True
