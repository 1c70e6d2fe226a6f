"""What `dlm-git verify --json` said, read as a test reads it: the exit code, the verdict,
the checks in order and the first that failed.

`call_main_in` runs the CLI in this process (its output captured by pytest's `capfd`),
`main_captured` the same for a fixture wider than one test (no `capfd` there: it captures
`sys.stdout`/`sys.stderr`, where dlm-git's own lines go, not other processes' output or a
library's log handler bound to the stream of its import), and
`verify_cli` the real executable in the isolated environment. In this process the
session's CPU profile is active (tests/conftest.py), so `train`, `eval` and the replay
levels run here as for a user, without a fresh interpreter importing torch, transformers
and peft again (~4 s a process); a process of its own is for what a test asserts of one
(another numerics profile, a bound on time, the process's own output and exit). Each
gives a `Result`; `assert_caught` and `assert_verified` are the two outcomes a forgery
test expects.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.env import run


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def payload(self) -> dict[str, Any]:
        try:
            return json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"not JSON ({exc}):\n{self.stdout}\n{self.stderr}") from None

    @property
    def doc(self) -> dict[str, Any]:
        docs = self.payload["documents"]
        assert len(docs) == 1, docs
        return docs[0]

    @property
    def verdict(self) -> str:
        return str(self.doc["verdict"])

    @property
    def checks(self) -> list[dict[str, Any]]:
        return list(self.doc["checks"])

    @property
    def first_failure(self) -> dict[str, Any] | None:
        return next((c for c in self.checks if not c["ok"]), None)

    def check(self, name: str) -> dict[str, Any]:
        return next(c for c in self.checks if c["name"] == name)

    def explain(self) -> str:
        lines = [f"exit {self.code}"]
        try:
            lines.append(f"verdict {self.verdict}")
            lines += [
                f"  {'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}" for c in self.checks
            ]
            lines += [f"  note: {n}" for n in self.doc.get("notes", [])]
        except AssertionError:
            lines.append(self.stdout)
        lines.append(self.stderr)
        return "\n".join(lines)


CallMain = Callable[[list[str]], Result]


def call_main_in(root: Path, capfd: Any) -> CallMain:
    """A runner for `dlm_git.cli.main` with cwd = `root`, output captured by `capfd`."""

    def call(argv: list[str]) -> Result:
        from dlm_git.cli import main

        capfd.readouterr()
        with contextlib.chdir(root):
            code = main(argv)
        out, err = capfd.readouterr()
        return Result(code, out, err)

    return call


def main_captured(root: Path, argv: list[str]) -> Result:
    """`dlm_git.cli.main(argv)` with cwd = `root`, what it writes to `sys.stdout` and
    `sys.stderr` captured (every line dlm-git prints: dlm_git/output.py): for a fixture
    wider than one test, where pytest has no `capfd` to give."""
    from dlm_git.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            contextlib.chdir(root),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = main(argv)
    except BaseException:  # what it said before it raised, for the failing test's report
        sys.stdout.write(out.getvalue())
        sys.stderr.write(err.getvalue())
        raise
    return Result(code, out.getvalue(), err.getvalue())


def verify_cli(root: Path, *args: str, timeout: float = 600) -> Result:
    """`dlm-git verify ARGS --json` as a subprocess, from `root`."""
    proc = run(["dlm-git", "verify", *args, "--json"], root, check=False, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def assert_caught(result: Result, check: str, verdicts: tuple[str, ...] = ("FAILED",)) -> None:
    """Exit 1, a failing verdict, and `check` is the first check that failed."""
    why = result.explain()
    assert result.code == 1, why
    assert result.payload["verdict"] == "FAILED", why
    assert result.verdict in verdicts, why
    first = result.first_failure
    assert first is not None and first["name"] == check, why


def assert_verified(result: Result) -> None:
    why = result.explain()
    assert result.code == 0, why
    assert result.payload["verdict"] == "VERIFIED", why
    assert all(c["ok"] for c in result.checks), why


def caught(result: Result, check: str, words: str) -> None:
    """A FAILED verdict in which `check` failed, its detail saying `words`."""
    why = result.explain()
    assert result.code == 1 and result.verdict == "FAILED", why
    failed = [c for c in result.checks if not c["ok"]]
    assert check in [c["name"] for c in failed], why
    assert words in result.check(check)["detail"], why
