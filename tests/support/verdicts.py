"""What `dlm-git verify --json` said, read as a test reads it: the exit code, the verdict,
the checks in order and the first that failed.

`call_main_in` runs the CLI in-process (fast; its output captured by pytest's `capfd`),
`verify_cli` as the real executable in the isolated environment (for the replay levels,
which train in child processes). Both give a `Result`; `assert_caught` and
`assert_verified` are the two outcomes a forgery test expects.
"""

from __future__ import annotations

import json
import os
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

        old = Path.cwd()
        capfd.readouterr()
        os.chdir(root)
        try:
            code = main(argv)
        finally:
            os.chdir(old)
        out, err = capfd.readouterr()
        return Result(code, out, err)

    return call


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
