"""Helpers for tests/hostile: hostile file names, the forgery module (loaded by path),
and runners for the real `dlm-git` executable and hook modules as subprocesses."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.forge import load_forgery

HOSTILE_NAMES = [
    "line\nbreak.md",
    "carriage\rreturn.md",
    "tab\there.md",
    "with space.md",
    "-leading-dash.md",
    "0:colon.md",
]
"""Source file names that must be read as themselves (all taken as sources)."""
SYMLINKS = {"inlink.md": "tab\there.md", "cfg.txt": "../../.git/config"}
"""Symbolic links planted among the sources: an in-repo one and one past the excludes."""
NON_UTF8_NAME = b"latin1-\xe9t\xe9.md"
"""A source file name that is not UTF-8: skipped with a reason, never a crash."""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def one_line_error(self, code: int, *names: str) -> str:
        """Assert exit `code` and one stderr line, no traceback, naming each of `names`."""
        why = f"exit {self.code}\nstdout: {self.stdout}\nstderr: {self.stderr}"
        assert self.code == code, why
        assert "Traceback" not in self.stderr, why
        lines = self.stderr.strip("\n").split("\n")
        assert len(lines) == 1 and lines[0], why
        for name in names:
            assert name in lines[0], why
        return lines[0]


def run(cmd: list[str], cwd: Path, stdin: str | None = None, timeout: float = 300) -> Run:
    env = load_forgery().venv_env()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def dlm_git(cwd: Path, *args: str, timeout: float = 300) -> Run:
    return run([str(Path(sys.executable).parent / "dlm-git"), *args], cwd, timeout=timeout)


def hook(cwd: Path, which: str, stdin: str = "") -> Run:
    return run([sys.executable, "-m", f"dlm_git.hooks.{which}"], cwd, stdin=stdin)


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid
