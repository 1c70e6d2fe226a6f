"""The real `dlm-git` executable and hook modules, run as subprocesses in the isolated
test environment, so a crash shows as what it is: a traceback on stderr or a signal
(a negative exit status).

`Run.one_line_error` is the project's rule for bad input, as a test states it: the
expected exit status and one stderr line naming what is wrong, never a traceback.
`imports_of` is the one way a test sees what a command's run imports (issue 28: no
`HEAVY` library where the command does not need it).
"""

from __future__ import annotations

import json
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


HEAVY = (
    "torch",
    "transformers",
    "peft",
    "dvc",
    "numpy",
    "safetensors",
    "tokenizers",
    "lm_eval",
    "datasets",
    "jinja2",
)
"""What a command imports only inside its body, where it needs them (issue 28): the
training and evaluation stacks, DVC, numpy and the template engine."""

_IMPORTS = """
import contextlib, io, json, sys
from dlm_git.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "stdout": out.getvalue(), "modules": sorted(sys.modules)}))
"""


@dataclass
class Imported:
    """What one run of the CLI imported: its exit code, its stdout, every module."""

    code: int
    stdout: str
    modules: set[str]

    @property
    def heavy(self) -> list[str]:
        """The `HEAVY` libraries among the modules."""
        return sorted(m for m in HEAVY if m in self.modules)


def imports_of(cwd: Path, *args: str) -> Imported:
    """`dlm-git ARGS` through `dlm_git.cli.main` in a fresh interpreter in `cwd` (as every
    run of it builds its parser and runs it), and what it imported."""
    proc = run([sys.executable, "-c", _IMPORTS, *args], cwd, timeout=300)
    found = json.loads(proc.stdout)
    return Imported(found["code"], found["stdout"], set(found["modules"]))


def hook(cwd: Path, which: str, stdin: str = "", **env: str) -> Run:
    """`python -m dlm_git.hooks.<which>` in `cwd`, git's hook input on stdin."""
    return run_cmd([sys.executable, "-m", f"dlm_git.hooks.{which}"], cwd, stdin=stdin, **env)
