"""The one entry of every git hook: a hook's work, and its failure as one line.

Invariant: a hook never ends in a traceback. Whatever the hook's body raises that a user
can act on, a `DlmGitError` (bad input, state or configuration) or an `OSError` (the
machine refused: a file gone, permissions, a removed working directory), is printed as
one `dlm-git: ERROR <subject>: <what> (hint: <fix>)` line and the hook exits 1, so git
refuses the commit, merge or push. Anything else is a bug and keeps its traceback.
Every hook module's `main` is `run_hook(<its body>)`.
"""

from __future__ import annotations

from collections.abc import Callable

from dlm_git.errors import DlmGitError, EnvironmentFailure
from dlm_git.output import error_line


def run_hook(body: Callable[[], int]) -> int:
    """`body()`'s exit status, or 1 after one error line when it fails as a user error."""
    try:
        return body()
    except DlmGitError as exc:
        error_line(f"dlm-git: ERROR {exc.one_line()}")
        return 1
    except OSError as exc:  # the machine refused (a file gone, permissions): one line
        error_line(f"dlm-git: ERROR {EnvironmentFailure.from_os_error(exc).one_line()}")
        return 1
