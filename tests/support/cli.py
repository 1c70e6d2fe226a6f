"""The real `dlm-git` executable and hook modules, run as subprocesses in the isolated
test environment, so a crash shows as what it is: a traceback on stderr or a signal
(a negative exit status).

`Run.one_line_error` is the project's rule for bad input, as a test states it: the
expected exit status and one stderr line naming what is wrong, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.env import VENV_BIN, run

RunCli = Callable[..., tuple[int, str, str]]
"""The type of the `run_cli` fixture (tests/integration/conftest.py): the CLI in-process,
`run_cli(*args) -> (exit code, stdout, stderr)`."""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def one_line_error(self, code: int, *names: str) -> str:
        """Assert exit `code` and one stderr line, no traceback, naming each of `names`."""
        why = f"exit {self.code}\nstdout: {self.stdout}\nstderr: {self.stderr}"
        assert self.code == code, why
        line = one_line(self.stderr, why)
        for name in names:
            assert name in line, why
        return line


def one_line(stderr: str, why: str = "") -> str:
    """The one line an error prints on stderr: no traceback, nothing else."""
    lines = stderr.strip("\n").split("\n")
    why = why or f"expected one line on stderr, got:\n{stderr}"
    assert len(lines) == 1 and lines[0] and "Traceback" not in stderr, why
    return lines[0]


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, *names: str) -> str:
    """`Run.one_line_error` of a finished subprocess."""
    return Run(proc.returncode, proc.stdout, proc.stderr).one_line_error(code, *names)


def run_cmd(
    cmd: list[str],
    cwd: Path,
    stdin: str | None = None,
    timeout: float = 300,
    check: bool = False,
    **env: str,
) -> Run:
    """`cmd` in `cwd`; with `check`, a non-zero exit fails the test with its output."""
    proc = run(cmd, cwd, check=check, input=stdin, timeout=timeout, **env)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def dlm_git(cwd: Path, *args: str, timeout: float = 300, check: bool = False, **env: str) -> Run:
    """The venv's `dlm-git ARGS` in `cwd`."""
    return run_cmd([str(VENV_BIN / "dlm-git"), *args], cwd, timeout=timeout, check=check, **env)


def cli(
    *args: object, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m dlm_git ARGS` in a fresh interpreter (`cwd`: the test's own by default),
    `env` on top of the isolated environment; the finished process as it is (a training
    of a real-scale base may take minutes: 900 s at most)."""
    where = Path.cwd() if cwd is None else cwd
    command = [sys.executable, "-m", "dlm_git", *map(str, args)]
    return run(command, where, check=False, timeout=900, **dict(env or {}))


def hook(cwd: Path, which: str, stdin: str = "", **env: str) -> Run:
    """`python -m dlm_git.hooks.<which>` in `cwd`, git's hook input on stdin."""
    return run_cmd([sys.executable, "-m", f"dlm_git.hooks.{which}"], cwd, stdin=stdin, **env)
